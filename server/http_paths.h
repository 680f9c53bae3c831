// The HTTP port's own paths, ahead of the REST gateway: the profiler page's
// files, GET /metrics (Prometheus), GET /healthz (readiness, for load
// balancers), GET /livez (liveness) and POST /v1/metrics (OTLP/HTTP). Other
// requests go to the gateway. Each of the own paths answers only its
// methods (405 otherwise).
//
// Thread-safety: thread-safe; Handle runs on the HTTP server's handler
// threads, and everything it points to must be.
#ifndef METRICS_SERVER_HTTP_PATHS_H_
#define METRICS_SERVER_HTTP_PATHS_H_

#include <cstddef>
#include <functional>
#include <utility>
#include <vector>

#include "absl/time/time.h"
#include "server/auth/call_guard.h"
#include "server/http/http_server.h"
#include "server/legacy/legacy_statistics.h"
#include "server/platform/trial_metrics_statistics.h"
#include "server/rest/rest_gateway.h"
#include "server/services/service_statistics.h"
#include "server/services/unary_call.h"
#include "server/web/web_assets.h"
#include "storage/metric_store.h"

namespace metrics::server {

struct HttpPathsOptions {
  const WebAssets* web = nullptr;  // null: no page is served
  const RestGateway* gateway = nullptr;  // required
  // What GET /metrics exports, and who may read it: null guard, anyone.
  storage::MetricStore* store = nullptr;  // required
  const CallGuard* metrics_guard = nullptr;
  // Who may POST /v1/metrics, checked before its body is decoded, so a
  // stranger cannot make the server inflate one; null: anyone (auth off).
  const CallGuard* guard = nullptr;
  const ServiceStatistics* statistics = nullptr;  // required
  // The unary methods served, whose latencies GET /metrics exports.
  std::vector<const UnaryMethod*> unary_methods;
  const LegacyStatistics* legacy_statistics = nullptr;  // required
  const TrialMetricsStatistics* trial_metrics_statistics = nullptr;  // required
  const Authenticator* authenticator = nullptr;  // null: auth off
  size_t prometheus_max_series = 0;
  absl::Duration stale_after;
  // Why the server is not ready, or null when it is (/healthz).
  std::function<const char*()> unready_reason;
};

class HttpPaths {
 public:
  explicit HttpPaths(HttpPathsOptions options) : options_(std::move(options)) {}

  HttpResponse Handle(const HttpRequest& request) const;

 private:
  // GET /metrics; blocks on one database read.
  HttpResponse PrometheusExport(const HttpRequest& request) const;

  const HttpPathsOptions options_;
};

}  // namespace metrics::server

#endif  // METRICS_SERVER_HTTP_PATHS_H_
