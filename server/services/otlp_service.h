// OTLP's MetricsService/Export on the gRPC port: an OpenTelemetry exporter's
// metrics (an SDK's, a Collector's) mapped to the service's series
// (server/otlp/otlp_mapping.h) and stored as batches without stream ids.
// Points it refuses are counted in the answer's partial success, the rest
// stored; the call fails only when a retry can help: RESOURCE_EXHAUSTED
// when the ingest queue is full (with "retry-after-ms"), UNAVAILABLE when
// the database is. OTLP has no sequence numbers, so an exporter that
// retries a request already stored stores it twice; the ingest stream is
// the exactly-once way in.
//
// Thread-safety: thread-safe; calls run on the executor.
#ifndef METRICS_SERVER_SERVICES_OTLP_SERVICE_H_
#define METRICS_SERVER_SERVICES_OTLP_SERVICE_H_

#include "common/blocking_executor.h"
#include "proto/opentelemetry/proto/collector/metrics/v1/metrics_service.grpc.pb.h"
#include "server/auth/call_guard.h"
#include "server/otlp/otlp_mapping.h"
#include "server/services/unary_call.h"
#include "storage/batch_validation.h"
#include "storage/metric_store.h"

namespace metrics::server {

class OtlpService final
    : public opentelemetry::proto::collector::metrics::v1::MetricsService::CallbackService {
 public:
  // `store`, `executor` and `guard` must outlive the service; a null
  // `guard` checks no caller (authentication off).
  OtlpService(storage::MetricStore* store, common::BlockingExecutor* executor,
              storage::IngestLimits limits, absl::Duration retry_after,
              const CallGuard* guard);

  // Export, for OTLP/HTTP (the REST gateway).
  const UnaryMethod* export_method() const { return &export_; }

  grpc::ServerUnaryReactor* Export(
      grpc::CallbackServerContext* context,
      const opentelemetry::proto::collector::metrics::v1::ExportMetricsServiceRequest*
          request,
      opentelemetry::proto::collector::metrics::v1::ExportMetricsServiceResponse*
          response) override;

 private:
  // Maps the export for its caller and queues its batches; `done` answers
  // once every batch has its outcome.
  void Submit(UnaryCall& call, UnaryMethod::Done done);

  storage::MetricStore* const store_;
  const storage::IngestLimits limits_;
  const absl::Duration retry_after_;
  const CallGuard* const guard_;
  RateState rates_;
  UnaryMethod export_;
};

}  // namespace metrics::server

#endif  // METRICS_SERVER_SERVICES_OTLP_SERVICE_H_
