#include "server/services/query_service.h"

#include "common/grpc_status.h"
#include "server/services/proto_convert.h"
#include "server/services/unary_call.h"

#include "proto/metrics/v1/query.grpc.pb.h"

namespace metrics::server {

namespace {

std::string Method(absl::string_view name) {
  return FullMethodName(v1::QueryService::service_full_name(), name);
}

}  // namespace

grpc::ServerUnaryReactor* QueryService::ListSeries(
    grpc::CallbackServerContext* context, const v1::ListSeriesRequest* request,
    v1::ListSeriesResponse* response) {
  return RunOnExecutor(
      context, executor_,
      Guarded(guard_, context, Method("ListSeries"), request,
              [engine = engine_, trial = request->trial_id(),
               response](absl::Time deadline) -> absl::Status {
                absl::StatusOr<std::vector<storage::SeriesInfo>> series =
                    engine->ListSeries(trial, deadline);
                if (!series.ok()) return series.status();
                for (const storage::SeriesInfo& s : *series) {
                  SeriesToProto(s, response->add_series());
                }
                return absl::OkStatus();
              }),
      &statistics_->list_series_seconds());
}

grpc::ServerUnaryReactor* QueryService::QuerySeries(
    grpc::CallbackServerContext* context,
    const v1::QuerySeriesRequest* request, v1::QuerySeriesResponse* response) {
  return RunOnExecutor(
      context, executor_,
      Guarded(guard_, context, Method("QuerySeries"), request,
              [engine = engine_, query = QueryFromProto(*request),
               view = request->view(),
               response](absl::Time deadline) -> absl::Status {
                if (absl::Status valid = CheckView(view); !valid.ok()) {
                  return valid;
                }
                absl::StatusOr<query::QueryResult> result =
                    engine->Query(query, deadline);
                if (!result.ok()) return result.status();
                QueryResultToProto(*result, view, response);
                return absl::OkStatus();
              }),
      &statistics_->query_series_seconds());
}

grpc::ServerWriteReactor<v1::QuerySeriesResponse>* QueryService::FollowSeries(
    grpc::CallbackServerContext* context,
    const v1::QuerySeriesRequest* request) {
  // The reactor checks the caller, then the view, in its first round, on
  // the executor (a stranger learns nothing of the request).
  std::function<absl::Status(absl::Time)> check;
  const absl::Status view = CheckView(request->view());
  if (guard_ != nullptr || !view.ok()) {
    check = [guard = guard_, context, request = *request,
             view](absl::Time deadline) {
      if (guard != nullptr) {
        absl::Status allowed =
            guard->Check(*context, Method("FollowSeries"), request, deadline);
        if (!allowed.ok()) return allowed;
      }
      return view;
    };
  }
  return new FollowReactor(context, follow_engine_, store_, executor_,
                           QueryFromProto(*request), request->view(), follow_,
                           statistics_->OpenFollowStream(), std::move(check));
}

}  // namespace metrics::server
