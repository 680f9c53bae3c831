// The platform's service determined.api.v1.Determined as gRPC serves it: one
// implementation of the generated service (gRPC takes a service's methods
// from one registered object) that hands each method to its part: the
// current trial-metrics API (ReportTrialMetrics and GetMetrics, on the
// callback API) to TrialMetricsService, the deprecated legacy profiler
// methods (the post on the callback API, the streams on gRPC's sync
// threads) to LegacyProfilerService.
//
// Thread-safety: thread-safe, as its parts.
#ifndef METRICS_SERVER_DETERMINED_SERVICE_H_
#define METRICS_SERVER_DETERMINED_SERVICE_H_

#include "proto/determined/api/v1/profiler.grpc.pb.h"
#include "server/legacy/legacy_profiler_service.h"
#include "server/platform/trial_metrics_service.h"

namespace metrics::server {

class DeterminedService final
    : public determined::api::v1::Determined::WithCallbackMethod_ReportTrialMetrics<
          determined::api::v1::Determined::WithCallbackMethod_GetMetrics<
              determined::api::v1::Determined::WithCallbackMethod_PostTrialProfilerMetricsBatch<
                  determined::api::v1::Determined::Service>>> {
 public:
  // Both parts must outlive the service.
  DeterminedService(TrialMetricsService* current, LegacyProfilerService* legacy)
      : current_(current), legacy_(legacy) {}

  grpc::ServerUnaryReactor* ReportTrialMetrics(
      grpc::CallbackServerContext* context,
      const determined::api::v1::ReportTrialMetricsRequest* request,
      determined::api::v1::ReportTrialMetricsResponse* response) override {
    return current_->ReportTrialMetrics(context, request, response);
  }
  grpc::ServerWriteReactor<determined::api::v1::GetMetricsResponse>* GetMetrics(
      grpc::CallbackServerContext* context,
      const determined::api::v1::GetMetricsRequest* request) override {
    return current_->GetMetrics(context, request);
  }
  grpc::Status GetTrialProfilerMetrics(
      grpc::ServerContext* context,
      const determined::api::v1::GetTrialProfilerMetricsRequest* request,
      grpc::ServerWriter<determined::api::v1::GetTrialProfilerMetricsResponse>* writer)
      override {
    return legacy_->GetTrialProfilerMetrics(context, request, writer);
  }
  grpc::Status GetTrialProfilerAvailableSeries(
      grpc::ServerContext* context,
      const determined::api::v1::GetTrialProfilerAvailableSeriesRequest* request,
      grpc::ServerWriter<determined::api::v1::GetTrialProfilerAvailableSeriesResponse>*
          writer) override {
    return legacy_->GetTrialProfilerAvailableSeries(context, request, writer);
  }
  grpc::ServerUnaryReactor* PostTrialProfilerMetricsBatch(
      grpc::CallbackServerContext* context,
      const determined::api::v1::PostTrialProfilerMetricsBatchRequest* request,
      determined::api::v1::PostTrialProfilerMetricsBatchResponse* response) override {
    return legacy_->PostTrialProfilerMetricsBatch(context, request, response);
  }

 private:
  TrialMetricsService* const current_;
  LegacyProfilerService* const legacy_;
};

}  // namespace metrics::server

#endif  // METRICS_SERVER_DETERMINED_SERVICE_H_
