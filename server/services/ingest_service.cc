#include "server/services/ingest_service.h"

#include "absl/strings/str_cat.h"
#include "common/grpc_status.h"
#include "common/retry_after.h"
#include "server/services/proto_convert.h"
#include "server/services/unary_call.h"
#include "storage/batch_validation.h"

namespace metrics::server {

grpc::ServerBidiReactor<v1::StreamSystemMetricsRequest,
                        v1::StreamSystemMetricsResponse>*
IngestService::StreamSystemMetrics(grpc::CallbackServerContext* context) {
  return new IngestStreamReactor(context, store_, open_executor_, options_,
                                 statistics_->OpenIngestStream(), guard_);
}

IngestService::IngestService(storage::MetricStore* store,
                             common::BlockingExecutor* executor,
                             common::BlockingExecutor* open_executor,
                             IngestStreamOptions options,
                             ServiceStatistics* statistics,
                             const CallGuard* guard)
    : store_(store),
      open_executor_(open_executor),
      options_(options),
      statistics_(statistics),
      guard_(guard) {
  report_.name = FullMethodName(v1::IngestService::service_full_name(),
                                "ReportSystemMetrics");
  report_.answering = [this](UnaryCall& call, UnaryMethod::Done done) {
    Submit(call, std::move(done));
  };
  // Queueing never waits.
  report_.without_waiting = [this](UnaryCall& call, UnaryMethod::Done& done) {
    Submit(call, std::move(done));
    return true;
  };
  report_.guard = guard;
  report_.executor = executor;
}

grpc::ServerUnaryReactor* IngestService::ReportSystemMetrics(
    grpc::CallbackServerContext* context,
    const v1::ReportSystemMetricsRequest* request,
    v1::ReportSystemMetricsResponse* response) {
  return ServeGrpcCall(report_, context, request, response);
}

void IngestService::Submit(UnaryCall& call,
                           std::function<void(absl::Status)> done) const {
  const auto& request =
      static_cast<const v1::ReportSystemMetricsRequest&>(*call.request);
  auto* response = static_cast<v1::ReportSystemMetricsResponse*>(call.response);
  if (!request.has_batch()) {
    done(absl::InvalidArgumentError("batch: missing"));
    return;
  }
  if (absl::Status label = storage::ValidateLabel(
          "stream_id", request.stream_id(), storage::kMaxLabelLength,
          /*allow_empty=*/true);
      !label.ok()) {
    done(std::move(label));
    return;
  }
  storage::MetricBatch batch = BatchFromProto(request.batch());
  batch.stream_id = request.stream_id();
  if (batch.stream_id.empty()) batch.sequence = 0;
  // Shared, so that a refusal to queue can still answer.
  auto answer = std::make_shared<std::function<void(absl::Status)>>(std::move(done));
  absl::Status queued = store_->SubmitBatch(
      std::move(batch), [answer, response](storage::BatchOutcome outcome) {
        switch (outcome.kind) {
          case storage::BatchOutcome::Kind::kStored:
            response->set_acked_sequence(outcome.sequence);
            (*answer)(absl::OkStatus());
            return;
          case storage::BatchOutcome::Kind::kDuplicate:
            response->set_acked_sequence(outcome.sequence);
            response->set_duplicate(true);
            (*answer)(absl::OkStatus());
            return;
          case storage::BatchOutcome::Kind::kRejected:
          case storage::BatchOutcome::Kind::kFailed:
            (*answer)(outcome.status);
            return;
        }
      });
  if (!queued.ok()) {
    if (queued.code() == absl::StatusCode::kResourceExhausted) {
      queued = common::WithRetryAfter(
          queued, common::RetryAfterOf(queued).value_or(options_.retry_after));
    }
    (*answer)(std::move(queued));
  }
}

}  // namespace metrics::server
