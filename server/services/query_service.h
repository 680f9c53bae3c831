// metrics.v1.QueryService: ListSeries, QuerySeries and SummarizeSeries
// (unary, run on the blocking executor), FollowSeries (one FollowReactor per call), and the
// exports ExportSamples and ExportTrace (one ExportReactor per call, on the
// service's `max_exports` export threads; RESOURCE_EXHAUSTED beyond).
//
// Thread-safety: thread-safe; gRPC calls it from its callback threads.
#ifndef METRICS_SERVER_SERVICES_QUERY_SERVICE_H_
#define METRICS_SERVER_SERVICES_QUERY_SERVICE_H_

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "common/blocking_executor.h"
#include "proto/metrics/v1/query.grpc.pb.h"
#include "query/follow_hub.h"
#include "query/query_engine.h"
#include "server/auth/call_guard.h"
#include "server/services/export_reactor.h"
#include "server/services/follow_reactor.h"
#include "server/services/unary_call.h"

namespace metrics::server {

class QueryService final : public v1::QueryService::CallbackService {
 public:
  // Exports run at once by default (ServerOptions::max_exports); each holds
  // a thread, a database connection and a page of each agent's reports.
  static constexpr int kDefaultMaxExports = 8;

  // `engine` answers ListSeries and QuerySeries (it may read a standby);
  // `follow_engine` answers FollowSeries and must see every acknowledged
  // commit (it reads store->PrimaryReads()). They, `store`, `executor`,
  // `statistics` and `guard` must outlive the service; a null `guard` checks
  // no caller (authentication off). At most `max_exports` (> 0) exports run
  // at once.
  QueryService(query::QueryEngine* engine, query::QueryEngine* follow_engine,
               storage::MetricStore* store, common::BlockingExecutor* executor,
               FollowOptions follow, ServiceStatistics* statistics,
               const CallGuard* guard, int max_exports = kDefaultMaxExports);
  // Waits for the exports still running (the server's shutdown cancels
  // them): they read through what the service was given.
  ~QueryService() override;

  // ListSeries, QuerySeries and SummarizeSeries, for the REST gateway.
  std::vector<const UnaryMethod*> UnaryMethodsServed() const;

  grpc::ServerUnaryReactor* ListSeries(grpc::CallbackServerContext* context,
                                       const v1::ListSeriesRequest* request,
                                       v1::ListSeriesResponse* response) override;
  grpc::ServerUnaryReactor* QuerySeries(
      grpc::CallbackServerContext* context,
      const v1::QuerySeriesRequest* request,
      v1::QuerySeriesResponse* response) override;
  grpc::ServerUnaryReactor* SummarizeSeries(
      grpc::CallbackServerContext* context,
      const v1::SummarizeSeriesRequest* request,
      v1::QuerySeriesResponse* response) override;
  grpc::ServerWriteReactor<v1::QuerySeriesResponse>* FollowSeries(
      grpc::CallbackServerContext* context,
      const v1::QuerySeriesRequest* request) override;
  grpc::ServerWriteReactor<v1::ExportChunk>* ExportSamples(
      grpc::CallbackServerContext* context,
      const v1::ExportSamplesRequest* request) override;
  grpc::ServerWriteReactor<v1::ExportChunk>* ExportTrace(
      grpc::CallbackServerContext* context,
      const v1::ExportTraceRequest* request) override;

 private:
  // Starts `produce` behind the guard's check of `request`, in a free export
  // slot.
  grpc::ServerWriteReactor<v1::ExportChunk>* StartExport(
      grpc::CallbackServerContext* context, absl::string_view method,
      const google::protobuf::Message* request, std::string content_type,
      std::string file_name, ExportReactor::Produce produce);

  query::QueryEngine* const engine_;
  // Followers of the same query share its rounds.
  query::FollowHub follow_hub_;
  storage::MetricStore* const store_;
  common::BlockingExecutor* const executor_;
  const FollowOptions follow_;
  ServiceStatistics* const statistics_;
  const CallGuard* const guard_;
  const int max_exports_;
  const UnaryMethod list_series_;
  const UnaryMethod query_series_;
  const UnaryMethod summarize_series_;
  absl::Mutex exports_mu_;
  int exports_ ABSL_GUARDED_BY(exports_mu_) = 0;  // running, refused ones too
  // The admitted exports' threads (never more queued than max_exports_
  // admits); last, so that they are joined first.
  common::BlockingExecutor export_threads_;
};

}  // namespace metrics::server

#endif  // METRICS_SERVER_SERVICES_QUERY_SERVICE_H_
