#include "server/services/ingest_stream_reactor.h"

#include <grpcpp/server_context.h>

#include <utility>

#include "proto/metrics/v1/ingest.grpc.pb.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/grpc_status.h"
#include "common/retry_after.h"
#include "server/services/proto_convert.h"
#include "storage/batch_validation.h"

namespace metrics::server {

IngestStreamReactor::IngestStreamReactor(grpc::CallbackServerContext* context,
                                         storage::MetricStore* store,
                                         common::BlockingExecutor* open_executor,
                                         const IngestStreamOptions& options,
                                         ServiceStatistics::OpenStream open,
                                         const CallGuard* guard)
    : context_(context),
      store_(store),
      executor_(open_executor),
      guard_(guard),
      options_(options),
      open_(std::move(open)),
      request_(google::protobuf::Arena::CreateMessage<
               v1::StreamSystemMetricsRequest>(&arena_)) {
  absl::MutexLock lock(&mu_);
  reading_ = true;
  StartRead(request_);  // held by gRPC until the reactor is bound
}

void IngestStreamReactor::OnReadDone(bool ok) {
  Actions actions;
  {
    absl::MutexLock lock(&mu_);
    reading_ = false;
    if (!ok) {
      reads_done_ = true;
    } else if (!finished_) {
      if (!opened_) {
        HandleOpen(actions);
      } else {
        HandleBatch(actions);
      }
    }
    ProgressLocked(actions);
  }
  Run(std::move(actions));
}

void IngestStreamReactor::HandleOpen(Actions& actions) {
  if (!request_->has_open()) {
    FinishLocked(absl::InvalidArgumentError(
                     "open: the first message of a stream must be `open` "
                     "(stream id and trial id)"),
                 actions);
    return;
  }
  const v1::StreamOpen& open = request_->open();
  if (absl::Status label =
          storage::ValidateLabel("open.stream_id", open.stream_id(),
                                 storage::kMaxLabelLength, false);
      !label.ok()) {
    FinishLocked(label, actions);
    return;
  }
  if (open.trial_id() <= 0) {
    FinishLocked(absl::InvalidArgumentError(
                     "open.trial_id: must be a positive trial id"),
                 actions);
    return;
  }
  stream_id_ = open.stream_id();
  trial_id_ = open.trial_id();
  opening_ = true;
  ++refs_;
  const absl::Time deadline = absl::Now() + options_.open_timeout;
  const bool posted = executor_->Post(
      [this, trial = trial_id_, stream = stream_id_, deadline,
       first = *request_]() {
        if (Gone()) {
          OnOpened(absl::CancelledError("the stream ended before it opened"),
                   nullptr);
          return;
        }
        if (absl::Now() >= deadline) {
          OnOpened(absl::ResourceExhaustedError(absl::StrCat(
                       "open: waited ",
                       absl::FormatDuration(options_.open_timeout),
                       " for its turn; the server is busy opening other "
                       "streams; retry later")),
                   nullptr);
          return;
        }
        absl::StatusOr<int64_t> position;
        // Checked once per stream: later batches name this trial or none.
        absl::Status allowed = CheckCall(
            guard_, *context_,
            FullMethodName(v1::IngestService::service_full_name(),
                           "StreamSystemMetrics"),
            first, deadline);
        absl::StatusOr<storage::StreamStart> start =
            allowed.ok() ? store_->GetStreamStart(trial, stream, deadline)
                         : absl::StatusOr<storage::StreamStart>(allowed);
        if (!start.ok()) {
          position = start.status();
        } else if (absl::Status takes = storage::CheckTrialTakesMetrics(
                       "open.trial_id", trial, start->trial.state);
                   !takes.ok()) {
          position = std::move(takes);
        } else {
          position = start->position;
        }
        std::unique_ptr<CredentialWatch::Watched> watched;
        if (position.ok() && guard_ != nullptr) {
          watched = guard_->WatchStream(
              CallGuard::CredentialOf(*context_),
              [this](absl::Status refused) { OnRefused(refused); });
        }
        OnOpened(std::move(position), std::move(watched));
      });
  if (!posted) {
    --refs_;
    opening_ = false;
    AddRetryAfterLocked(absl::OkStatus());
    FinishLocked(absl::ResourceExhaustedError(
                     "the server is busy opening other streams; retry later"),
                 actions);
  }
}

void IngestStreamReactor::HandleBatch(Actions& actions) {
  if (request_->has_open()) {
    FinishLocked(absl::InvalidArgumentError(
                     "open: a stream is opened once, by its first message"),
                 actions);
    return;
  }
  if (!request_->has_batch()) {
    FinishLocked(absl::InvalidArgumentError("batch: the message is empty"),
                 actions);
    return;
  }
  storage::MetricBatch batch = StreamBatchFromProto(
      std::move(*request_->mutable_batch()), trial_id_, declared_);
  // Idle streams are most of a server's streams: none keeps its last batch.
  arena_.Reset();
  request_ = google::protobuf::Arena::CreateMessage<
      v1::StreamSystemMetricsRequest>(&arena_);
  if (batch.trial_id == 0) {
    batch.trial_id = trial_id_;
  } else if (batch.trial_id != trial_id_) {
    FinishLocked(absl::InvalidArgumentError(absl::StrCat(
                     "batch.trial_id: ", batch.trial_id,
                     " differs from the stream's trial ", trial_id_)),
                 actions);
    return;
  }
  if (batch.sequence <= 0) {
    FinishLocked(absl::InvalidArgumentError(
                     "batch.sequence: must be 1 or more"),
                 actions);
    return;
  }
  if (batch.sequence < next_sequence_) return;  // a resend of what we have
  if (batch.sequence > next_sequence_) {
    FinishLocked(absl::FailedPreconditionError(absl::StrCat(
                     "batch.sequence ", batch.sequence, ": expected ",
                     next_sequence_, " (the server has every batch up to ",
                     next_sequence_ - 1, ")")),
                 actions);
    return;
  }
  batch.stream_id = stream_id_;
  ++inflight_;
  ++refs_;
  ++next_sequence_;
  // The store never calls back before SubmitBatch returns, so holding mu_
  // here cannot deadlock.
  absl::Status queued = store_->SubmitBatch(
      std::move(batch),
      [this](storage::BatchOutcome outcome) { OnCommitted(std::move(outcome)); });
  if (!queued.ok()) {
    --inflight_;
    --refs_;
    --next_sequence_;
    if (queued.code() == absl::StatusCode::kResourceExhausted) {
      AddRetryAfterLocked(queued);
    }
    FinishLocked(queued, actions);
  }
}

void IngestStreamReactor::OnOpened(
    absl::StatusOr<int64_t> position,
    std::unique_ptr<CredentialWatch::Watched> watched) {
  Actions actions;
  {
    absl::MutexLock lock(&mu_);
    opening_ = false;
    // Once OnDone began, it is not kept (dropped below).
    if (!leaving_) watched_ = std::move(watched);
    if (!done_ && !finished_) {
      if (!position.ok()) {
        if (position.status().code() == absl::StatusCode::kResourceExhausted) {
          AddRetryAfterLocked(absl::OkStatus());
        }
        FinishLocked(position.status(), actions);
      } else {
        opened_ = true;
        next_sequence_ = *position + 1;
        acked_ = *position;
      }
      ProgressLocked(actions);
    }
    ++starting_;
  }
  // Outside mu_, which a running OnRefused takes, and while this call still
  // holds the reactor: the registration is gone before the hold is.
  watched.reset();
  RunFromStore(std::move(actions));
  Release();
}

void IngestStreamReactor::OnRefused(const absl::Status& status) {
  Actions actions;
  {
    absl::MutexLock lock(&mu_);
    // OnDone waits for this callback before it lets the reactor go, so
    // the reactor is alive; the hold keeps it so past a Finish that runs
    // OnDone on this very thread.
    ++refs_;
    if (!done_) FinishLocked(status, actions);
    ++starting_;
  }
  RunFromStore(std::move(actions));
  Release();
}

void IngestStreamReactor::OnCommitted(storage::BatchOutcome outcome) {
  Actions actions;
  {
    absl::MutexLock lock(&mu_);
    --inflight_;
    if (!done_ && !finished_) {
      switch (outcome.kind) {
        case storage::BatchOutcome::Kind::kStored:
        case storage::BatchOutcome::Kind::kDuplicate:
          acked_ = std::max(acked_, outcome.sequence);
          break;
        case storage::BatchOutcome::Kind::kRejected: {
          acked_ = std::max(acked_, outcome.sequence);
          v1::BatchRejection& r = rejections_.emplace_back();
          r.set_sequence(outcome.sequence);
          r.set_code(static_cast<int32_t>(outcome.status.code()));
          r.set_message(std::string(outcome.status.message()));
          break;
        }
        case storage::BatchOutcome::Kind::kFailed:
          FinishLocked(outcome.status, actions);
          break;
      }
      ProgressLocked(actions);
    }
    ++starting_;
  }
  RunFromStore(std::move(actions));
  Release();
}

void IngestStreamReactor::OnWriteDone(bool ok) {
  Actions actions;
  {
    absl::MutexLock lock(&mu_);
    writing_ = false;
    if (!ok && !finished_) {
      finished_ = true;
      grpc::Status failed(grpc::StatusCode::UNAVAILABLE,
                          "writing an acknowledgement failed");
      if (starting_ > 0) {
        deferred_finish_ = std::move(failed);
      } else {
        actions.finish = std::move(failed);
      }
    } else if (finished_) {
      if (deferred_finish_.has_value() && starting_ == 0) {
        actions.finish = std::move(*deferred_finish_);
        deferred_finish_.reset();
      }
    } else {
      ProgressLocked(actions);
    }
  }
  Run(std::move(actions));
}

void IngestStreamReactor::OnCancel() {
  Actions actions;
  {
    absl::MutexLock lock(&mu_);
    FinishLocked(absl::CancelledError("the client cancelled the stream"),
                 actions);
  }
  Run(std::move(actions));
}

void IngestStreamReactor::OnDone() {
  std::unique_ptr<CredentialWatch::Watched> watched;
  {
    absl::MutexLock lock(&mu_);
    leaving_ = true;  // no open registers one after this
    watched = std::move(watched_);
  }
  // Waits for a running OnRefused (outside mu_, which it takes); none
  // starts after.
  watched.reset();
  bool last;
  {
    absl::MutexLock lock(&mu_);
    done_ = true;
    last = refs_ == 0;
  }
  if (last) delete this;
}

void IngestStreamReactor::FinishLocked(const absl::Status& status,
                                       Actions& actions) {
  if (finished_) return;
  finished_ = true;
  grpc::Status grpc_status = common::ToGrpcStatus(status);
  // Send what is acknowledged (and refused) before the status, so the client
  // learns of it even as the stream ends.
  PrepareAckLocked(actions);
  if (writing_ || starting_ > 0) {
    deferred_finish_ = std::move(grpc_status);
  } else {
    actions.finish = std::move(grpc_status);
  }
}

void IngestStreamReactor::PrepareAckLocked(Actions& actions) {
  if (writing_ || !opened_ ||
      (acked_ == written_ack_ && rejections_.empty())) {
    return;
  }
  response_.Clear();
  response_.set_acked_sequence(acked_);
  for (v1::BatchRejection& r : rejections_) {
    *response_.add_rejected() = std::move(r);
  }
  rejections_.clear();
  written_ack_ = acked_;
  writing_ = true;
  actions.write = true;
}

void IngestStreamReactor::ProgressLocked(Actions& actions) {
  if (done_ || finished_) return;
  PrepareAckLocked(actions);
  if (!reading_ && !reads_done_ && opened_ &&
      inflight_ < options_.max_inflight) {
    reading_ = true;
    actions.read = request_;
  }
  if (reads_done_ && inflight_ == 0 && !opening_ && !writing_) {
    FinishLocked(absl::OkStatus(), actions);
  }
}

void IngestStreamReactor::AddRetryAfterLocked(const absl::Status& refusal) {
  context_->AddTrailingMetadata(
      "retry-after-ms",
      std::to_string(absl::ToInt64Milliseconds(
          common::RetryAfterOf(refusal).value_or(options_.retry_after))));
}

bool IngestStreamReactor::Gone() {
  absl::MutexLock lock(&mu_);
  return done_ || finished_;
}

void IngestStreamReactor::Run(Actions actions) {
  if (actions.write) StartWrite(&response_);
  if (actions.read != nullptr) StartRead(actions.read);
  if (actions.finish.has_value()) Finish(std::move(*actions.finish));
}

void IngestStreamReactor::RunFromStore(Actions actions) {
  Run(std::move(actions));
  std::optional<grpc::Status> finish;
  {
    absl::MutexLock lock(&mu_);
    if (--starting_ == 0 && !writing_ && deferred_finish_.has_value()) {
      finish = std::move(*deferred_finish_);
      deferred_finish_.reset();
    }
  }
  if (finish.has_value()) Finish(std::move(*finish));
}

void IngestStreamReactor::Release() {
  bool last;
  {
    absl::MutexLock lock(&mu_);
    --refs_;
    last = done_ && refs_ == 0;
  }
  if (last) delete this;
}

}  // namespace metrics::server
