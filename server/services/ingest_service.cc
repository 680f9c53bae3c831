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

grpc::ServerUnaryReactor* IngestService::ReportSystemMetrics(
    grpc::CallbackServerContext* context,
    const v1::ReportSystemMetricsRequest* request,
    v1::ReportSystemMetricsResponse* response) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  if (guard_ == nullptr) {
    Submit(context, request, response, reactor);
    return reactor;
  }
  const std::string method = FullMethodName(
      v1::IngestService::service_full_name(), "ReportSystemMetrics");
  // A known caller is checked here; an unknown token needs the database,
  // which only an executor thread may wait on.
  if (std::optional<absl::Status> allowed =
          guard_->CheckCached(*context, method, *request, true)) {
    if (allowed->ok()) {
      Submit(context, request, response, reactor);
    } else {
      reactor->Finish(common::ToGrpcStatus(*allowed));
    }
    return reactor;
  }
  const absl::Time deadline = CallDeadline(*context);
  if (!executor_->Post([this, context, request, response, reactor, method,
                        deadline] {
        if (absl::Status allowed =
                guard_->Check(*context, method, *request, deadline);
            !allowed.ok()) {
          reactor->Finish(common::ToGrpcStatus(allowed));
          return;
        }
        Submit(context, request, response, reactor);
      })) {
    reactor->Finish(common::ToGrpcStatus(
        absl::ResourceExhaustedError("the server is busy; retry later")));
  }
  return reactor;
}

void IngestService::Submit(grpc::CallbackServerContext* context,
                           const v1::ReportSystemMetricsRequest* request,
                           v1::ReportSystemMetricsResponse* response,
                           grpc::ServerUnaryReactor* reactor) {
  if (!request->has_batch()) {
    reactor->Finish(common::ToGrpcStatus(
        absl::InvalidArgumentError("batch: missing")));
    return;
  }
  if (absl::Status label = storage::ValidateLabel(
          "stream_id", request->stream_id(), storage::kMaxLabelLength,
          /*allow_empty=*/true);
      !label.ok()) {
    reactor->Finish(common::ToGrpcStatus(label));
    return;
  }
  storage::MetricBatch batch = BatchFromProto(request->batch());
  batch.stream_id = request->stream_id();
  if (batch.stream_id.empty()) batch.sequence = 0;
  absl::Status queued = store_->SubmitBatch(
      std::move(batch), [reactor, response](storage::BatchOutcome outcome) {
        switch (outcome.kind) {
          case storage::BatchOutcome::Kind::kStored:
            response->set_acked_sequence(outcome.sequence);
            reactor->Finish(grpc::Status::OK);
            return;
          case storage::BatchOutcome::Kind::kDuplicate:
            response->set_acked_sequence(outcome.sequence);
            response->set_duplicate(true);
            reactor->Finish(grpc::Status::OK);
            return;
          case storage::BatchOutcome::Kind::kRejected:
          case storage::BatchOutcome::Kind::kFailed:
            reactor->Finish(common::ToGrpcStatus(outcome.status));
            return;
        }
      });
  if (!queued.ok()) {
    if (queued.code() == absl::StatusCode::kResourceExhausted) {
      context->AddTrailingMetadata(
          "retry-after-ms",
          std::to_string(absl::ToInt64Milliseconds(
              common::RetryAfterOf(queued).value_or(options_.retry_after))));
    }
    reactor->Finish(common::ToGrpcStatus(queued));
  }
}

}  // namespace metrics::server
