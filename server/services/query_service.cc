#include "server/services/query_service.h"

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/grpc_status.h"
#include "common/status_macros.h"
#include "query/export.h"
#include "server/services/proto_convert.h"
#include "server/services/unary_call.h"

#include "proto/metrics/v1/query.grpc.pb.h"

namespace metrics::server {

namespace {

// An export reads for as long as it takes to send (a slow reader slows
// it), in one snapshot; past this it ends with DEADLINE_EXCEEDED unless the
// caller set a deadline. A longer run is exported in windows.
constexpr absl::Duration kExportTimeout = absl::Hours(1);

std::string QueryMethod(absl::string_view name) {
  return FullMethodName(v1::QueryService::service_full_name(), name);
}

}  // namespace

QueryService::QueryService(query::QueryEngine* engine,
                           query::QueryEngine* follow_engine,
                           storage::MetricStore* store,
                           common::BlockingExecutor* executor,
                           FollowOptions follow, ServiceStatistics* statistics,
                           const CallGuard* guard, int max_exports)
    : engine_(engine),
      follow_hub_(follow_engine, store, executor, kStoreCallTimeout),
      store_(store),
      executor_(executor),
      follow_(follow),
      statistics_(statistics),
      guard_(guard),
      max_exports_(max_exports),
      list_series_(BlockingMethod(
          QueryMethod("ListSeries"),
          Typed<v1::ListSeriesRequest, v1::ListSeriesResponse>(
              [engine](UnaryCall& call, const v1::ListSeriesRequest& request,
                       v1::ListSeriesResponse* response) -> absl::Status {
                absl::StatusOr<std::vector<storage::SeriesInfo>> series =
                    engine->ListSeries(request.trial_id(), call.deadline);
                if (!series.ok()) return series.status();
                for (const storage::SeriesInfo& s : *series) {
                  SeriesToProto(s, response->add_series());
                }
                return absl::OkStatus();
              }),
          guard, executor)),
      query_series_(BlockingMethod(
          QueryMethod("QuerySeries"),
          Typed<v1::QuerySeriesRequest, v1::QuerySeriesResponse>(
              [engine](UnaryCall& call, const v1::QuerySeriesRequest& request,
                       v1::QuerySeriesResponse* response) -> absl::Status {
                RETURN_IF_ERROR(CheckView(request.view()));
                RETURN_IF_ERROR(CheckResolution(request, absl::Now()));
                absl::StatusOr<query::QueryResult> result =
                    engine->Query(QueryFromProto(request), call.deadline);
                if (!result.ok()) return result.status();
                QueryResultToProto(*result, request.view(), response);
                return absl::OkStatus();
              }),
          guard, executor)),
      summarize_series_(BlockingMethod(
          QueryMethod("SummarizeSeries"),
          Typed<v1::SummarizeSeriesRequest, v1::QuerySeriesResponse>(
              [engine](UnaryCall& call, const v1::SummarizeSeriesRequest& request,
                       v1::QuerySeriesResponse* response) -> absl::Status {
                RETURN_IF_ERROR(CheckView(request.view()));
                RETURN_IF_ERROR(CheckGroup(request.group()));
                absl::StatusOr<query::SummaryResult> result = query::Summarize(
                    *engine, SummaryFromProto(request), call.deadline);
                if (!result.ok()) return result.status();
                SummaryToProto(*result, request.view(), response);
                return absl::OkStatus();
              }),
          guard, executor)),
      export_threads_(max_exports, max_exports) {}

std::vector<const UnaryMethod*> QueryService::UnaryMethodsServed() const {
  return {&list_series_, &query_series_, &summarize_series_};
}

grpc::ServerUnaryReactor* QueryService::ListSeries(
    grpc::CallbackServerContext* context, const v1::ListSeriesRequest* request,
    v1::ListSeriesResponse* response) {
  return ServeGrpcCall(list_series_, context, request, response);
}

grpc::ServerUnaryReactor* QueryService::QuerySeries(
    grpc::CallbackServerContext* context,
    const v1::QuerySeriesRequest* request, v1::QuerySeriesResponse* response) {
  return ServeGrpcCall(query_series_, context, request, response);
}

grpc::ServerUnaryReactor* QueryService::SummarizeSeries(
    grpc::CallbackServerContext* context,
    const v1::SummarizeSeriesRequest* request, v1::QuerySeriesResponse* response) {
  return ServeGrpcCall(summarize_series_, context, request, response);
}

grpc::ServerWriteReactor<v1::QuerySeriesResponse>* QueryService::FollowSeries(
    grpc::CallbackServerContext* context,
    const v1::QuerySeriesRequest* request) {
  // The reactor checks the caller, then the view, in its first round, on
  // the executor (a stranger learns nothing of the request).
  std::function<absl::Status(absl::Time)> check;
  absl::Status view = CheckView(request->view());
  if (view.ok()) view = CheckResolution(*request, absl::Now());
  if (guard_ != nullptr || !view.ok()) {
    check = [guard = guard_, context, request = *request,
             view](absl::Time deadline) {
      if (guard != nullptr) {
        absl::Status allowed =
            guard->Check(*context, QueryMethod("FollowSeries"), request, deadline);
        if (!allowed.ok()) return allowed;
      }
      return view;
    };
  }
  return new FollowReactor(context, &follow_hub_, QueryFromProto(*request),
                           request->view(), follow_,
                           statistics_->OpenFollowStream(), std::move(check),
                           guard_);
}

QueryService::~QueryService() {
  absl::MutexLock lock(&exports_mu_);
  exports_mu_.Await(absl::Condition(
      +[](int* exports) { return *exports == 0; }, &exports_));
}

grpc::ServerWriteReactor<v1::ExportChunk>* QueryService::StartExport(
    grpc::CallbackServerContext* context, absl::string_view method,
    const google::protobuf::Message* request, std::string content_type, std::string file_name,
    ExportReactor::Produce produce) {
  bool full;
  {
    absl::MutexLock lock(&exports_mu_);
    full = exports_++ >= max_exports_;
  }
  if (full) {
    produce = [limit = max_exports_](const query::ExportEmit&) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "too many exports at once (the limit is ", limit, "); try again"));
    };
  }
  // A refused export still checks its caller first, on the chart
  // executor: the export threads are the admitted exports'.
  return ExportReactor::Start(
      full ? *executor_ : export_threads_, std::move(content_type), std::move(file_name),
      [guard = guard_, context, method = QueryMethod(method), request,
       deadline = CallDeadline(*context), produce = std::move(produce)](const query::ExportEmit& emit) {
        // The caller is checked on the export's thread: a stranger learns
        // nothing of the request, not even whether it is well formed.
        if (absl::Status allowed = CheckCall(guard, *context, method, *request, deadline);
            !allowed.ok()) {
          return allowed;
        }
        return produce(emit);
      },
      [this] {
        absl::MutexLock lock(&exports_mu_);
        --exports_;
      });
}

grpc::ServerWriteReactor<v1::ExportChunk>* QueryService::ExportSamples(
    grpc::CallbackServerContext* context, const v1::ExportSamplesRequest* request) {
  const absl::Time deadline = CallDeadline(*context, kExportTimeout);
  return StartExport(
      context, "ExportSamples", request, "text/csv; charset=utf-8",
      absl::StrCat("trial-", request->trial_id(), "-system-metrics.csv"),
      [reads = &store_->Reads(), query = QueryFromProto(*request),
       deadline](const query::ExportEmit& emit) {
        return query::ExportCsv(*reads, query, deadline, emit);
      });
}

grpc::ServerWriteReactor<v1::ExportChunk>* QueryService::ExportTrace(
    grpc::CallbackServerContext* context, const v1::ExportTraceRequest* request) {
  const absl::Time deadline = CallDeadline(*context, kExportTimeout);
  return StartExport(
      context, "ExportTrace", request, "application/json",
      absl::StrCat("trial-", request->trial_id(), "-system-metrics.trace.json"),
      [engine = engine_, query = QueryFromProto(*request),
       base = request->base_time_nanoseconds(), deadline](const query::ExportEmit& emit) {
        if (base < 0) {
          return absl::InvalidArgumentError(absl::StrCat(
              "base_time_nanoseconds: ", base, " is negative (0 means the epoch)"));
        }
        return query::ExportTrace(*engine, query, base, deadline, emit);
      });
}

}  // namespace metrics::server
