#include "tests/testing/resending_streamer.h"

#include <grpcpp/create_channel.h>
#include <grpcpp/security/credentials.h>

#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"

namespace metrics::test_util {

namespace {

// State shared by the writer (caller) and the reader thread of one attempt.
struct Attempt {
  absl::Mutex mu;
  int64_t acked ABSL_GUARDED_BY(mu) = -1;
  bool ended ABSL_GUARDED_BY(mu) = false;
};

}  // namespace

absl::Status ResendingStreamer::Send(
    std::vector<v1::SystemMetricsBatch>& batches) {
  const int64_t n = static_cast<int64_t>(batches.size());
  for (int64_t i = 0; i < n; ++i) batches[i].set_sequence(i + 1);
  const absl::Time deadline = absl::Now() + options_.timeout;
  int64_t acked = 0;
  std::string last_error = "none";
  while (acked < n) {
    if (absl::Now() > deadline) {
      return absl::DeadlineExceededError(absl::StrCat(
          "acknowledged ", acked, " of ", n, " batches; last error: ",
          last_error));
    }
    ++connections_;
    auto stub = v1::IngestService::NewStub(
        grpc::CreateChannel(target_(), options_.credentials != nullptr
                                           ? options_.credentials
                                           : grpc::InsecureChannelCredentials()));
    grpc::ClientContext context;
    context.set_deadline(absl::ToChronoTime(deadline));
    if (!options_.token.empty()) {
      context.AddMetadata("authorization", "Bearer " + options_.token);
    }
    auto stream = stub->StreamSystemMetrics(&context);
    v1::StreamSystemMetricsRequest open;
    open.mutable_open()->set_stream_id(options_.stream_id);
    open.mutable_open()->set_trial_id(options_.trial_id);

    Attempt attempt;
    std::thread reader([&] {
      v1::StreamSystemMetricsResponse response;
      while (stream->Read(&response)) {
        {
          absl::MutexLock lock(&attempt.mu);
          attempt.acked = response.acked_sequence();
          for (const auto& r : response.rejected()) rejections_.push_back(r);
        }
        if (options_.on_ack) options_.on_ack(response.acked_sequence());
      }
      absl::MutexLock lock(&attempt.mu);
      attempt.ended = true;
    });
    // The first answer gives the server's position.
    int64_t next = 0;
    if (stream->Write(open)) {
      absl::MutexLock lock(&attempt.mu);
      attempt.mu.Await(absl::Condition(
          +[](Attempt* a) ABSL_NO_THREAD_SAFETY_ANALYSIS {
            return a->acked >= 0 || a->ended;
          },
          &attempt));
      next = attempt.acked + 1;
    }
    while (next > 0 && next <= n) {
      {
        absl::MutexLock lock(&attempt.mu);
        struct Window {
          Attempt* a;
          int64_t next;
          int window;
        } w{&attempt, next, options_.window};
        attempt.mu.Await(absl::Condition(
            +[](Window* w) ABSL_NO_THREAD_SAFETY_ANALYSIS {
              return w->a->ended || w->next - w->a->acked <= w->window;
            },
            &w));
        if (attempt.ended) break;
      }
      // The batch is lent, not copied (a copy per send was a third of the
      // ingest benchmark client's CPU): Write serializes it before returning.
      v1::StreamSystemMetricsRequest request;
      request.unsafe_arena_set_allocated_batch(&batches[next - 1]);
      const bool written = stream->Write(request);
      (void)request.unsafe_arena_release_batch();
      if (!written) break;
      ++next;
    }
    stream->WritesDone();
    reader.join();
    const grpc::Status status = stream->Finish();
    {
      absl::MutexLock lock(&attempt.mu);
      acked = std::max(acked, attempt.acked);
    }
    if (acked >= n) break;
    last_error = absl::StrCat(status.error_code(), ": ", status.error_message());
    const bool permanent =
        status.error_code() == grpc::StatusCode::INVALID_ARGUMENT ||
        status.error_code() == grpc::StatusCode::NOT_FOUND ||
        (status.error_code() == grpc::StatusCode::FAILED_PRECONDITION &&
         status.error_message().find("expected") == std::string::npos);
    if (permanent) {
      return absl::Status(static_cast<absl::StatusCode>(status.error_code()),
                          status.error_message());
    }
    absl::SleepFor(absl::Milliseconds(100));  // reconnect backoff
  }
  return absl::OkStatus();
}

}  // namespace metrics::test_util
