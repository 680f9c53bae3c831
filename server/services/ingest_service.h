// metrics.v1.IngestService: StreamSystemMetrics (one IngestStreamReactor
// per call) and the unary ReportSystemMetrics, both over the store's
// group-commit writer.
//
// Thread-safety: thread-safe; gRPC calls it from its callback threads.
#ifndef METRICS_SERVER_SERVICES_INGEST_SERVICE_H_
#define METRICS_SERVER_SERVICES_INGEST_SERVICE_H_

#include <functional>
#include <vector>

#include "proto/metrics/v1/ingest.grpc.pb.h"
#include "common/blocking_executor.h"
#include "server/services/ingest_stream_reactor.h"
#include "server/services/unary_call.h"
#include "storage/metric_store.h"

namespace metrics::server {

class IngestService final : public v1::IngestService::CallbackService {
 public:
  // `store`, the executors, `statistics` and `guard` must outlive the service;
  // a null `guard` checks no caller (authentication off). Streams open on
  // `open_executor`, so a fleet reconnecting at once waits its turn there
  // without crowding out the unary calls of `executor`.
  IngestService(storage::MetricStore* store, common::BlockingExecutor* executor,
                common::BlockingExecutor* open_executor,
                IngestStreamOptions options, ServiceStatistics* statistics,
                const CallGuard* guard);

  // ReportSystemMetrics, for the REST gateway.
  std::vector<const UnaryMethod*> UnaryMethodsServed() const {
    return {&report_};
  }

  grpc::ServerBidiReactor<v1::StreamSystemMetricsRequest,
                          v1::StreamSystemMetricsResponse>*
  StreamSystemMetrics(grpc::CallbackServerContext* context) override;

  grpc::ServerUnaryReactor* ReportSystemMetrics(
      grpc::CallbackServerContext* context,
      const v1::ReportSystemMetricsRequest* request,
      v1::ReportSystemMetricsResponse* response) override;

 private:
  // Validates and queues a unary report (never blocks).
  void Submit(UnaryCall& call, std::function<void(absl::Status)> done) const;

  storage::MetricStore* const store_;
  common::BlockingExecutor* const open_executor_;
  const IngestStreamOptions options_;
  ServiceStatistics* const statistics_;
  const CallGuard* const guard_;
  UnaryMethod report_;
};

}  // namespace metrics::server

#endif  // METRICS_SERVER_SERVICES_INGEST_SERVICE_H_
