#include "server/services/otlp_service.h"

#include <algorithm>
#include <memory>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "common/grpc_status.h"
#include "common/retry_after.h"
#include "server/services/unary_call.h"

namespace metrics::server {

namespace {

namespace collector = ::opentelemetry::proto::collector::metrics::v1;

// The outcomes of one export's batches, gathered on the writer threads;
// the last one in finishes the call.
class ExportOutcome {
 public:
  ExportOutcome(UnaryMethod::Done done,
                collector::ExportMetricsServiceResponse* response, OtlpBatches mapped,
                int pending)
      : done_(std::move(done)),
        response_(response),
        rejected_(mapped.rejected_points),
        reasons_(std::move(mapped.reasons)),
        pending_(pending) {}

  // Takes one batch's outcome; `points`: the values it held.
  void Take(const storage::BatchOutcome& outcome, int64_t points) {
    bool last;
    {
      absl::MutexLock lock(&mu_);
      if (outcome.kind == storage::BatchOutcome::Kind::kRejected) {
        rejected_ += points;
        const std::string reason(outcome.status.message());
        if (reasons_.size() < kMaxOtlpReasons &&
            std::find(reasons_.begin(), reasons_.end(), reason) == reasons_.end()) {
          reasons_.push_back(reason);
        }
      } else if (outcome.kind == storage::BatchOutcome::Kind::kFailed &&
                 failure_.ok()) {
        failure_ = outcome.status;
      }
      last = --pending_ == 0;
    }
    if (last) Finish();
  }

  // Answers the call (partial success, or the failure a retry can fix)
  // and deletes this.
  void Finish() {
    absl::Status failure;
    int64_t rejected;
    std::string reasons;
    {
      absl::MutexLock lock(&mu_);
      failure = failure_;
      rejected = rejected_;
      reasons = absl::StrJoin(reasons_, "; ");
    }
    if (failure.ok() && rejected > 0) {
      auto* partial = response_->mutable_partial_success();
      partial->set_rejected_data_points(rejected);
      partial->set_error_message(reasons);
    }
    UnaryMethod::Done done = std::move(done_);
    delete this;
    done(std::move(failure));
  }

 private:
  UnaryMethod::Done done_;
  collector::ExportMetricsServiceResponse* const response_;
  absl::Mutex mu_;
  int64_t rejected_ ABSL_GUARDED_BY(mu_);
  std::vector<std::string> reasons_ ABSL_GUARDED_BY(mu_);
  absl::Status failure_ ABSL_GUARDED_BY(mu_);
  int pending_ ABSL_GUARDED_BY(mu_);
};

}  // namespace

OtlpService::OtlpService(storage::MetricStore* store,
                         common::BlockingExecutor* executor,
                         storage::IngestLimits limits, absl::Duration retry_after,
                         const CallGuard* guard)
    : store_(store), limits_(limits), retry_after_(retry_after), guard_(guard) {
  export_.name =
      FullMethodName(collector::MetricsService::service_full_name(), "Export");
  export_.answering = [this](UnaryCall& call, UnaryMethod::Done done) {
    Submit(call, std::move(done));
  };
  export_.guard = guard;
  export_.executor = executor;
}

grpc::ServerUnaryReactor* OtlpService::Export(
    grpc::CallbackServerContext* context,
    const collector::ExportMetricsServiceRequest* request,
    collector::ExportMetricsServiceResponse* response) {
  return ServeGrpcCall(export_, context, request, response);
}

void OtlpService::Submit(UnaryCall& call, UnaryMethod::Done done) {
  const auto& request =
      static_cast<const collector::ExportMetricsServiceRequest&>(*call.request);
  auto* response =
      static_cast<collector::ExportMetricsServiceResponse*>(call.response);
  // A reporter's points are kept to its own trial, point by point: the
  // request names its trials in its resources' attributes.
  std::optional<int32_t> only_trial;
  if (guard_ != nullptr) {
    absl::StatusOr<Principal> caller = guard_->Caller(
        call.credential, call.peer, export_.name, request, call.deadline);
    if (!caller.ok()) {
      done(caller.status());
      return;
    }
    if (caller->role == storage::TokenRole::kReporter) only_trial = caller->trial_id;
  }
  OtlpBatches mapped = MapExport(request, rates_, limits_, absl::Now(), only_trial);
  std::vector<storage::MetricBatch> batches = std::move(mapped.batches);
  auto* outcome = new ExportOutcome(std::move(done), response, std::move(mapped),
                                    static_cast<int>(batches.size()));
  if (batches.empty()) {
    outcome->Finish();
    return;
  }
  for (size_t i = 0; i < batches.size(); ++i) {
    const int64_t points = static_cast<int64_t>(batches[i].ValueCount());
    absl::Status queued = store_->SubmitBatch(
        std::move(batches[i]),
        [outcome, points](storage::BatchOutcome o) { outcome->Take(o, points); });
    if (!queued.ok()) {
      // The queue is full or the server stops: this and every later batch
      // fail, so the exporter retries the request.
      if (queued.code() == absl::StatusCode::kResourceExhausted) {
        queued = common::WithRetryAfter(
            queued, common::RetryAfterOf(queued).value_or(retry_after_));
      }
      for (size_t j = i; j < batches.size(); ++j) {
        storage::BatchOutcome failed;
        failed.kind = storage::BatchOutcome::Kind::kFailed;
        failed.status = queued;
        outcome->Take(failed, 0);
      }
      return;
    }
  }
}

}  // namespace metrics::server
