#include "server/query_service.h"

#include "common/grpc_status.h"
#include "server/proto_convert.h"
#include "server/trial_service.h"

namespace metrics::server {

namespace {

// Posts `work` (returning absl::Status) to the executor and finishes the
// call with its status; `latency` gets the time from the call's start.
template <typename Work>
grpc::ServerUnaryReactor* RunOnExecutor(grpc::CallbackServerContext* context,
                                        BlockingExecutor* executor,
                                        common::Histogram& latency, Work work) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  const absl::Time deadline = CallDeadline(*context);
  const absl::Time start = absl::Now();
  if (!executor->Post([reactor, deadline, start, &latency,
                       work = std::move(work)]() {
        const absl::Status status = work(deadline);
        latency.Observe(absl::ToDoubleSeconds(absl::Now() - start));
        reactor->Finish(common::ToGrpcStatus(status));
      })) {
    reactor->Finish(common::ToGrpcStatus(
        absl::ResourceExhaustedError("the server is busy; retry later")));
  }
  return reactor;
}

}  // namespace

grpc::ServerUnaryReactor* QueryService::ListSeries(
    grpc::CallbackServerContext* context, const v1::ListSeriesRequest* request,
    v1::ListSeriesResponse* response) {
  return RunOnExecutor(
      context, executor_, figures_->list_series_seconds(),
      [engine = engine_, trial = request->trial_id(),
       response](absl::Time deadline) -> absl::Status {
        absl::StatusOr<std::vector<storage::SeriesInfo>> series =
            engine->ListSeries(trial, deadline);
        if (!series.ok()) return series.status();
        for (const storage::SeriesInfo& s : *series) {
          SeriesToProto(s, response->add_series());
        }
        return absl::OkStatus();
      });
}

grpc::ServerUnaryReactor* QueryService::QuerySeries(
    grpc::CallbackServerContext* context,
    const v1::QuerySeriesRequest* request, v1::QuerySeriesResponse* response) {
  return RunOnExecutor(
      context, executor_, figures_->query_series_seconds(),
      [engine = engine_, query = QueryFromProto(*request),
       response](absl::Time deadline) -> absl::Status {
        absl::StatusOr<query::QueryResult> result =
            engine->Query(query, deadline);
        if (!result.ok()) return result.status();
        QueryResultToProto(*result, response);
        return absl::OkStatus();
      });
}

grpc::ServerWriteReactor<v1::QuerySeriesResponse>* QueryService::FollowSeries(
    grpc::CallbackServerContext* context,
    const v1::QuerySeriesRequest* request) {
  return new FollowReactor(context, engine_, store_, executor_,
                           QueryFromProto(*request), follow_,
                           figures_->OpenFollowStream());
}

}  // namespace metrics::server
