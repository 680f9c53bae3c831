#include "client/reporter.h"

#include <grpcpp/create_channel.h>
#include <grpcpp/security/credentials.h>
#include <grpcpp/support/channel_arguments.h>

#include <algorithm>
#include <cmath>
#include <optional>
#include <string>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/inlined_vector.h"
#include "absl/random/random.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "client/backoff.h"
#include "client/pending_samples.h"
#include "common/grpc_status.h"
#include "common/vocabulary/label.h"
#include "common/vocabulary/signals.h"
#include "proto/metrics/v1/ingest.grpc.pb.h"

namespace metrics::client {

namespace {

using Request = v1::StreamSystemMetricsRequest;

// How long the server may be unreachable before an event says so.
constexpr absl::Duration kUnreachableAfter = absl::Seconds(2);

// Statuses that resending cannot fix: the trial is unknown or finished, the
// stream was malformed, or we may not send at all. A sequence gap
// (FAILED_PRECONDITION) on an open stream means another client uses the
// stream id; resending would not help either. (A server that lost batches
// it had acknowledged says so at the opening: FollowARestoredServer.)
bool IsPermanent(grpc::StatusCode code) {
  switch (code) {
    case grpc::StatusCode::INVALID_ARGUMENT:
    case grpc::StatusCode::NOT_FOUND:
    case grpc::StatusCode::ALREADY_EXISTS:
    case grpc::StatusCode::FAILED_PRECONDITION:
    case grpc::StatusCode::OUT_OF_RANGE:
    case grpc::StatusCode::PERMISSION_DENIED:
    case grpc::StatusCode::UNAUTHENTICATED:
    case grpc::StatusCode::UNIMPLEMENTED:
      return true;
    default:
      return false;
  }
}

absl::Status ValidateOptions(const ReporterOptions& o) {
  if (o.server_address.empty()) {
    return absl::InvalidArgumentError("server_address: must be set");
  }
  if (o.trial_id <= 0) {
    return absl::InvalidArgumentError("trial_id: must be a positive trial id");
  }
  if (o.agent_id.empty()) {
    return absl::InvalidArgumentError("agent_id: must be set");
  }
  if (const std::string problem =
          signals::LabelProblem(o.agent_id, signals::kMaxLabelLength, false);
      !problem.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("agent_id: ", problem));
  }
  // gRPC takes only printable ASCII in metadata. The message does not
  // quote the token.
  if (!std::all_of(o.token.begin(), o.token.end(),
                   [](char c) { return c > 0x20 && c < 0x7f; })) {
    return absl::InvalidArgumentError(
        "token: must be printable ASCII without spaces (check the token "
        "file)");
  }
  if (o.max_batch_samples < 1) {
    return absl::InvalidArgumentError("max_batch_samples: must be 1 or more");
  }
  if (o.max_batch_age <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("max_batch_age: must be positive");
  }
  if (o.max_unacked_batches < 1) {
    return absl::InvalidArgumentError("max_unacked_batches: must be 1 or more");
  }
  if (o.buffer_samples < o.max_batch_samples) {
    return absl::InvalidArgumentError(
        "buffer_samples: must hold at least max_batch_samples");
  }
  if (o.max_series < 1) {
    return absl::InvalidArgumentError("max_series: must be 1 or more");
  }
  if (o.initial_backoff <= absl::ZeroDuration() ||
      o.max_backoff < o.initial_backoff || o.backoff_multiplier < 1 ||
      o.backoff_jitter < 0 || o.backoff_jitter >= 1) {
    return absl::InvalidArgumentError(
        "backoff: need 0 < initial_backoff <= max_backoff, "
        "backoff_multiplier >= 1 and 0 <= backoff_jitter < 1");
  }
  return absl::OkStatus();
}

std::string DefaultStreamId(const ReporterOptions& o) {
  absl::BitGen random;
  return absl::StrCat(o.agent_id.substr(0, 64), "/", o.trial_id, "/",
                      absl::Hex(absl::Uniform<uint64_t>(random),
                                absl::kZeroPad16));
}

}  // namespace

class Reporter::Impl {
 public:
  explicit Impl(ReporterOptions options)
      : options_(std::move(options)),
        backoff_(options_.initial_backoff, options_.max_backoff,
                 options_.backoff_multiplier, options_.backoff_jitter) {
    grpc::ChannelArguments args;
    // The channel's own reconnect delays follow ours; its default grows to
    // two minutes, which would hide a restarted server that long.
    args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS,
                static_cast<int>(absl::ToInt64Milliseconds(options_.initial_backoff)));
    args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS,
                static_cast<int>(absl::ToInt64Milliseconds(options_.max_backoff)));
    // Pings find a server that vanished without closing the connection
    // (metricsd permits them every 10 s).
    args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, 30000);
    args.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, 10000);
    auto credentials = options_.credentials
                           ? options_.credentials
                           : grpc::InsecureChannelCredentials();
    channel_ =
        grpc::CreateCustomChannel(options_.server_address, credentials, args);
    stub_ = v1::IngestService::NewStub(channel_);
    thread_ = std::thread([this] { Run(); });
  }

  ~Impl() {
    if (thread_.joinable()) {
      Shutdown(absl::Now() + options_.shutdown_timeout).IgnoreError();  // the
      // result is in stats() for whoever cares; a destructor cannot return it
    }
  }

  const std::string& stream_id() const { return options_.stream_id; }

  absl::Status Record(absl::Time time, absl::Span<const Measurement> values);
  absl::Status Flush(absl::Time deadline) ABSL_LOCKS_EXCLUDED(mu_);
  absl::Status Shutdown(absl::Time deadline) ABSL_LOCKS_EXCLUDED(mu_);
  ReporterStats stats() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  // A batch sent at least once, kept until acknowledged.
  struct UnackedBatch {
    int64_t sequence;
    int64_t samples;
    int sends;
    std::shared_ptr<const Request> request;
  };

  void Run() ABSL_LOCKS_EXCLUDED(mu_);
  // Waits until the channel connects; false when the reporter stops first.
  bool AwaitChannelReady() ABSL_LOCKS_EXCLUDED(mu_);
  // One stream from open to end; returns how it ended.
  grpc::Status RunStream(grpc::ClientContext& context) ABSL_LOCKS_EXCLUDED(mu_);
  // Waits for the next batch to write on the current stream; nullptr when
  // the stream must end.
  std::shared_ptr<const Request> NextWrite() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void OnResponse(const v1::StreamSystemMetricsResponse& response)
      ABSL_LOCKS_EXCLUDED(mu_);
  void Acknowledge(int64_t sequence) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // At a stream's opening, when the server has fewer batches than it
  // acknowledged: the held batches follow its position.
  void FollowARestoredServer(int64_t server_has) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Fail(absl::Status status) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Emit(std::string event) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void EmitQueued() ABSL_LOCKS_EXCLUDED(mu_);

  bool StreamMustEnd() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return stop_ || stream_ended_ || !failure_.ok();
  }
  bool CanWrite() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool BatchDue() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool Drained() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return (pending_.size() == 0 && unacked_.empty()) || !failure_.ok() ||
           stop_;
  }
  int64_t Held() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return pending_.size() + unacked_samples_;
  }

  const ReporterOptions options_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::IngestService::Stub> stub_;
  Backoff backoff_;  // used by the thread only

  mutable absl::Mutex mu_;
  PendingSamples pending_ ABSL_GUARDED_BY(mu_);
  std::deque<UnackedBatch> unacked_ ABSL_GUARDED_BY(mu_);
  int64_t unacked_samples_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t next_sequence_ ABSL_GUARDED_BY(mu_) = 1;
  // unacked_[write_index_] is the next batch to write on the current stream.
  size_t write_index_ ABSL_GUARDED_BY(mu_) = 0;
  bool stream_ended_ ABSL_GUARDED_BY(mu_) = false;
  grpc::ClientContext* context_ ABSL_GUARDED_BY(mu_) = nullptr;
  // Refusals the server announced for batches not yet acknowledged.
  absl::flat_hash_map<int64_t, absl::Status> rejections_ ABSL_GUARDED_BY(mu_);
  int flushes_ ABSL_GUARDED_BY(mu_) = 0;
  bool closed_ ABSL_GUARDED_BY(mu_) = false;  // Record refused
  bool stop_ ABSL_GUARDED_BY(mu_) = false;    // the thread must exit
  absl::Status failure_ ABSL_GUARDED_BY(mu_);  // permanent
  std::string last_error_ ABSL_GUARDED_BY(mu_) = "none";
  std::vector<std::string> events_ ABSL_GUARDED_BY(mu_);
  // An event said the server is unreachable; the next stream says it is back.
  bool lost_ ABSL_GUARDED_BY(mu_) = false;
  // The inventory went out with a batch (once per Reporter: resends carry it).
  bool inventory_sent_ ABSL_GUARDED_BY(mu_) = false;
  ReporterStats stats_ ABSL_GUARDED_BY(mu_);

  absl::Mutex emit_mu_ ABSL_ACQUIRED_BEFORE(mu_);
  absl::Mutex shutdown_mu_;
  std::optional<absl::Status> shutdown_result_ ABSL_GUARDED_BY(shutdown_mu_);
  std::thread thread_;
};

absl::Status Reporter::Impl::Record(absl::Time time,
                                    absl::Span<const Measurement> values) {
  for (size_t i = 0; i < values.size(); ++i) {
    // The server's label rule, so a bad label is refused here, as the
    // Python client does, not later with its whole batch.
    for (const auto& [field, value, max_length, allow_empty] :
         {std::tuple("name", values[i].name, signals::kMaxLabelLength, false),
          std::tuple("unit", values[i].unit, signals::kMaxUnitLength, true),
          std::tuple("gpu_uuid", values[i].gpu_uuid, signals::kMaxLabelLength, true)}) {
      if (const std::string problem = signals::LabelProblem(value, max_length, allow_empty);
          !problem.empty()) {
        return absl::InvalidArgumentError(
            absl::StrCat("values[", i, "].", field, ": ", problem));
      }
    }
    if (!std::isfinite(values[i].value)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "values[", i, "].value: ", values[i].value, " for \"",
          values[i].name, "\" is not a finite number"));
    }
  }
  const auto n = static_cast<int64_t>(values.size());
  if (n > options_.buffer_samples) {
    return absl::InvalidArgumentError(absl::StrCat(
        "values: ", n, " values do not fit a buffer of ",
        options_.buffer_samples, " samples"));
  }
  absl::MutexLock lock(&mu_);
  if (closed_) {
    return absl::FailedPreconditionError("the reporter is shut down");
  }
  if (!failure_.ok()) return failure_;
  absl::InlinedVector<uint32_t, 32> series;
  for (const Measurement& m : values) {
    std::optional<uint32_t> number =
        pending_.Intern(m.name, m.gpu_uuid, m.unit, options_.max_series);
    if (!number) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "series \"", m.name, "\": more than max_series (",
          options_.max_series, ") distinct series"));
    }
    series.push_back(*number);
  }
  if (Held() + n > options_.buffer_samples) {
    if (options_.overflow == OverflowPolicy::kDropOldest) {
      const int64_t drop =
          std::min(Held() + n - options_.buffer_samples, pending_.size());
      pending_.DropOldest(drop);
      stats_.dropped += drop;
    } else {
      struct Room {
        Impl* impl;
        int64_t n;
      } room{this, n};
      mu_.AwaitWithTimeout(
          absl::Condition(
              +[](Room* r) ABSL_NO_THREAD_SAFETY_ANALYSIS {
                return r->impl->Held() + r->n <= r->impl->options_.buffer_samples ||
                       r->impl->closed_ || !r->impl->failure_.ok();
              },
              &room),
          options_.block_timeout);
      if (closed_) {
        return absl::FailedPreconditionError("the reporter is shut down");
      }
      if (!failure_.ok()) return failure_;
    }
    if (Held() + n > options_.buffer_samples) {
      stats_.dropped += n;
      return absl::ResourceExhaustedError(absl::StrCat(
          "buffer full: ", Held(), " samples are waiting or unacknowledged (",
          "buffer_samples ", options_.buffer_samples,
          "); the values were dropped. Last error: ", last_error_));
    }
  }
  const absl::Time now = absl::Now();
  for (size_t i = 0; i < series.size(); ++i) {
    pending_.Push(time, series[i], values[i].value, now);
  }
  stats_.recorded += n;
  return absl::OkStatus();
}

bool Reporter::Impl::BatchDue() const {
  return pending_.size() >= options_.max_batch_samples ||
         (pending_.size() > 0 &&
          (flushes_ > 0 || closed_ ||
           absl::Now() >= pending_.oldest_recorded() + options_.max_batch_age));
}

bool Reporter::Impl::CanWrite() const {
  if (StreamMustEnd() || write_index_ < unacked_.size()) return true;
  return static_cast<int>(unacked_.size()) < options_.max_unacked_batches &&
         BatchDue();
}

std::shared_ptr<const Request> Reporter::Impl::NextWrite() {
  while (true) {
    // Wake when the oldest sample's batch comes due, unless the window is
    // full anyway (acknowledgements wake us then).
    const bool window_open =
        static_cast<int>(unacked_.size()) < options_.max_unacked_batches;
    const absl::Time due = window_open ? pending_.oldest_recorded() +
                                             options_.max_batch_age
                                       : absl::InfiniteFuture();
    mu_.AwaitWithDeadline(absl::Condition(this, &Impl::CanWrite), due);
    if (StreamMustEnd()) return nullptr;
    if (write_index_ < unacked_.size()) {
      UnackedBatch& b = unacked_[write_index_++];
      if (b.sends++ > 0) stats_.retried += b.samples;
      return b.request;
    }
    if (!CanWrite()) continue;
    auto request = std::make_shared<Request>();
    v1::SystemMetricsBatch* batch = request->mutable_batch();
    *batch = pending_.TakeBatch(options_.max_batch_samples, options_.agent_id);
    batch->set_sequence(next_sequence_++);
    batch->set_trial_id(options_.trial_id);
    if (options_.inventory.has_value() && !inventory_sent_) {
      *batch->mutable_inventory() = *options_.inventory;
      inventory_sent_ = true;
    }
    int64_t samples = 0;
    for (const auto& r : batch->reports()) samples += r.values_size();
    unacked_.push_back({batch->sequence(), samples, 1, request});
    unacked_samples_ += samples;
    write_index_ = unacked_.size();
    stats_.sent += samples;
    return request;
  }
}

void Reporter::Impl::Acknowledge(int64_t sequence) {
  while (!unacked_.empty() && unacked_.front().sequence <= sequence) {
    const UnackedBatch& b = unacked_.front();
    if (auto it = rejections_.find(b.sequence); it != rejections_.end()) {
      stats_.rejected += b.samples;
      last_error_ = it->second.ToString();
      Emit(absl::StrCat("the server refused batch ", b.sequence, " (",
                        b.samples, " samples): ", last_error_));
      // The trial ended or vanished: every later batch would be refused too.
      if (it->second.code() == absl::StatusCode::kFailedPrecondition ||
          it->second.code() == absl::StatusCode::kNotFound) {
        Fail(it->second);
      }
      rejections_.erase(it);
    } else {
      stats_.acknowledged += b.samples;
    }
    unacked_samples_ -= b.samples;
    unacked_.pop_front();
    if (write_index_ > 0) --write_index_;
  }
}

void Reporter::Impl::FollowARestoredServer(int64_t server_has) {
  const int64_t first_held = unacked_.empty() ? next_sequence_ : unacked_.front().sequence;
  if (server_has >= first_held - 1) return;
  // The server has fewer batches than it acknowledged: its database was
  // restored from a backup (docs/operating.md, "Backup and restore"). The
  // batches after its position that this reporter no longer holds are lost;
  // the ones it holds follow the position, renumbered, so the stream goes on
  // without a gap.
  const int64_t lost = first_held - 1 - server_has;
  int64_t sequence = server_has;
  for (UnackedBatch& b : unacked_) {
    auto renumbered = std::make_shared<Request>(*b.request);
    renumbered->mutable_batch()->set_sequence(++sequence);
    b.sequence = sequence;
    b.request = std::move(renumbered);
  }
  next_sequence_ = sequence + 1;
  Emit(absl::StrCat("stream ", options_.stream_id, ": the server has batches up to ",
                    server_has, " only, though it had acknowledged up to ",
                    first_held - 1, " (was its database restored from a backup?); ",
                    lost, " acknowledged batches are lost; going on from batch ",
                    server_has + 1));
}

void Reporter::Impl::OnResponse(const v1::StreamSystemMetricsResponse& response) {
  {
    absl::MutexLock lock(&mu_);
    for (const v1::BatchRejection& r : response.rejected()) {
      rejections_[r.sequence()] =
          absl::Status(static_cast<absl::StatusCode>(r.code()), r.message());
    }
    Acknowledge(response.acked_sequence());
  }
  EmitQueued();
}

void Reporter::Impl::Fail(absl::Status status) {
  if (!failure_.ok()) return;
  failure_ = std::move(status);
  last_error_ = failure_.ToString();
  Emit(absl::StrCat("stopped: ", last_error_));
}

void Reporter::Impl::Emit(std::string event) {
  if (options_.on_event) events_.push_back(std::move(event));
}

void Reporter::Impl::EmitQueued() {
  // The stream's reader and the Reporter's thread both emit; one at a time,
  // in order, so on_event needs no locking of its own.
  absl::MutexLock emit_lock(&emit_mu_);
  std::vector<std::string> events;
  {
    absl::MutexLock lock(&mu_);
    events.swap(events_);
  }
  for (const std::string& e : events) options_.on_event(e);
}

grpc::Status Reporter::Impl::RunStream(grpc::ClientContext& context) {
  std::unique_ptr<grpc::ClientReaderWriter<Request, v1::StreamSystemMetricsResponse>>
      stream = stub_->StreamSystemMetrics(&context);
  Request open;
  open.mutable_open()->set_stream_id(options_.stream_id);
  open.mutable_open()->set_trial_id(options_.trial_id);
  v1::StreamSystemMetricsResponse position;
  bool ok = stream->Write(open) && stream->Read(&position);
  if (ok) {
    absl::MutexLock lock(&mu_);
    if (position.acked_sequence() >= next_sequence_ &&
        options_.resume_stream && next_sequence_ == 1 && unacked_.empty()) {
      next_sequence_ = position.acked_sequence() + 1;
      Emit(absl::StrCat("continuing stream ", options_.stream_id,
                        " after batch ", position.acked_sequence()));
    } else if (position.acked_sequence() >= next_sequence_) {
      Fail(absl::FailedPreconditionError(absl::StrCat(
          "stream ", options_.stream_id, ": the server has batches up to ",
          position.acked_sequence(), " but this reporter sent only ",
          next_sequence_ - 1, "; another client uses the stream id")));
    } else {
      FollowARestoredServer(position.acked_sequence());
      Acknowledge(position.acked_sequence());
    }
    write_index_ = 0;  // resend every unacknowledged batch, in order
    if (lost_) {
      Emit(absl::StrCat("connected to ", options_.server_address, " again; ",
                        unacked_.size(), " unacknowledged batches to resend"));
      lost_ = false;
    }
  }
  EmitQueued();
  std::thread reader;
  if (ok) {
    reader = std::thread([this, &stream] {
      v1::StreamSystemMetricsResponse response;
      while (stream->Read(&response)) OnResponse(response);
      absl::MutexLock lock(&mu_);
      stream_ended_ = true;
    });
  }
  bool ended_by_us = false;
  while (ok) {
    std::shared_ptr<const Request> request;
    {
      absl::MutexLock lock(&mu_);
      request = NextWrite();
      ended_by_us = request == nullptr && !stream_ended_;
    }
    if (request == nullptr || !stream->Write(*request)) break;
  }
  // The stream is of no further use unless the server ended it (then its
  // status says why); cancelling also wakes the reader.
  if (ended_by_us) context.TryCancel();
  if (reader.joinable()) reader.join();
  return stream->Finish();
}

bool Reporter::Impl::AwaitChannelReady() {
  const absl::Time start = absl::Now();
  // In slices, so that Shutdown is never kept waiting long.
  while (!channel_->WaitForConnected(
      absl::ToChronoTime(absl::Now() + absl::Milliseconds(250)))) {
    {
      absl::MutexLock lock(&mu_);
      if (stop_) return false;
      if (!lost_ && absl::Now() - start >= kUnreachableAfter) {
        Emit(absl::StrCat("cannot reach ", options_.server_address,
                          " yet; buffering and still trying"));
        lost_ = true;
      }
    }
    EmitQueued();
  }
  return true;
}

void Reporter::Impl::Run() {
  while (AwaitChannelReady()) {
    grpc::ClientContext context;
    // Should the connection drop again before the stream starts, wait for
    // the channel's own reconnect rather than fail at once.
    context.set_wait_for_ready(true);
    if (!options_.token.empty()) {
      context.AddMetadata("authorization", "Bearer " + options_.token);
    }
    int64_t done_before;
    {
      absl::MutexLock lock(&mu_);
      if (stop_ || !failure_.ok()) break;
      context_ = &context;
      stream_ended_ = false;
      ++stats_.connections;
      done_before = stats_.acknowledged + stats_.rejected;
    }
    const grpc::Status status = RunStream(context);
    {
      absl::MutexLock lock(&mu_);
      context_ = nullptr;
      if (stop_ || !failure_.ok()) break;
      if (stats_.acknowledged + stats_.rejected > done_before) backoff_.Reset();
      last_error_ = common::FromGrpcStatus(status).ToString();
      if (IsPermanent(status.error_code())) {
        Fail(common::FromGrpcStatus(status));
        break;
      }
      absl::Duration delay = backoff_.Next();
      // An overloaded server says when to come back.
      const auto& trailers = context.GetServerTrailingMetadata();
      if (auto it = trailers.find("retry-after-ms"); it != trailers.end()) {
        int64_t ms = 0;
        if (absl::SimpleAtoi(
                absl::string_view(it->second.data(), it->second.size()), &ms)) {
          delay = std::max(delay, absl::Milliseconds(ms));
        }
      }
      if (!lost_) {
        Emit(absl::StrFormat("stream to %s ended (%s); reconnecting with "
                             "backoff, first in %s",
                             options_.server_address, last_error_,
                             absl::FormatDuration(delay)));
        lost_ = true;
      }
      mu_.AwaitWithTimeout(absl::Condition(&stop_), delay);
    }
    EmitQueued();
  }
  EmitQueued();
}

absl::Status Reporter::Impl::Flush(absl::Time deadline) {
  absl::MutexLock lock(&mu_);
  ++flushes_;
  mu_.AwaitWithDeadline(absl::Condition(this, &Impl::Drained), deadline);
  --flushes_;
  if (!failure_.ok()) return failure_;
  if (pending_.size() == 0 && unacked_.empty()) return absl::OkStatus();
  return absl::DeadlineExceededError(absl::StrCat(
      Held(), " samples not acknowledged by the deadline (", pending_.size(),
      " waiting, ", unacked_samples_, " sent and unacknowledged); last error: ",
      last_error_));
}

absl::Status Reporter::Impl::Shutdown(absl::Time deadline) {
  absl::MutexLock shutdown_lock(&shutdown_mu_);
  if (shutdown_result_) return *shutdown_result_;
  {
    absl::MutexLock lock(&mu_);
    closed_ = true;
  }
  absl::Status result = Flush(deadline);
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
    if (context_ != nullptr) context_->TryCancel();
  }
  thread_.join();
  absl::MutexLock lock(&mu_);
  stats_.unsent = Held();
  pending_.DropOldest(pending_.size());
  unacked_.clear();
  unacked_samples_ = 0;
  if (!result.ok()) {
    result = absl::Status(result.code(),
                          absl::StrCat(stats_.unsent, " samples could not be sent: ",
                                       result.message()));
  }
  shutdown_result_ = result;
  return result;
}

ReporterStats Reporter::Impl::stats() const {
  absl::MutexLock lock(&mu_);
  ReporterStats s = stats_;
  s.buffered = Held();
  return s;
}

absl::StatusOr<std::unique_ptr<Reporter>> Reporter::Create(
    ReporterOptions options) {
  if (absl::Status s = ValidateOptions(options); !s.ok()) return s;
  if (options.stream_id.empty()) options.stream_id = DefaultStreamId(options);
  return std::unique_ptr<Reporter>(
      new Reporter(std::make_unique<Impl>(std::move(options))));
}

Reporter::Reporter(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Reporter::~Reporter() = default;

absl::Status Reporter::Record(absl::Time time,
                              absl::Span<const Measurement> values) {
  return impl_->Record(time, values);
}
absl::Status Reporter::Flush(absl::Time deadline) {
  return impl_->Flush(deadline);
}
absl::Status Reporter::Shutdown(absl::Time deadline) {
  return impl_->Shutdown(deadline);
}
ReporterStats Reporter::stats() const { return impl_->stats(); }
const std::string& Reporter::stream_id() const { return impl_->stream_id(); }

}  // namespace metrics::client
