// The metricsd server: checks the database schema, then serves gRPC (trials,
// ingest, queries and follow, the platform's trial-metrics API
// (ReportTrialMetrics, GetMetrics), the deprecated legacy profiler API, the
// standard grpc.health.v1 health service, server reflection) and HTTP (the
// REST gateway to those services, /healthz (readiness), /livez, /metrics and
// the profiler page) until Shutdown.
//
// Usage (what main.cc does):
//   ASSIGN_OR_RETURN(auto server, MetricsServer::Create(options));
//   ... wait for SIGTERM ...
//   server->Shutdown(absl::Seconds(10));
//
// Thread-safety: Create and Shutdown are for one owning thread; the
// accessors are thread-safe.
#ifndef METRICS_SERVER_METRICS_SERVER_H_
#define METRICS_SERVER_METRICS_SERVER_H_

#include <grpcpp/server.h>

#include <atomic>
#include <functional>
#include <memory>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "common/blocking_executor.h"
#include "server/rest/gateway_socket.h"
#include "server/auth/authenticator.h"
#include "server/auth/call_guard.h"
#include "server/determined_service.h"
#include "server/http/http_server.h"
#include "server/http_paths.h"
#include "server/services/ingest_service.h"
#include "server/legacy/legacy_profiler_service.h"
#include "server/legacy/legacy_statistics.h"
#include "server/platform/trial_metrics_service.h"
#include "server/platform/trial_metrics_statistics.h"
#include "server/readiness.h"
#include "server/services/otlp_service.h"
#include "server/services/query_service.h"
#include "server/rest/rest_gateway.h"
#include "server/server_options.h"
#include "server/services/service_statistics.h"
#include "server/services/token_service.h"
#include "server/services/trial_service.h"
#include "server/web/web_assets.h"
#include "storage/metric_store.h"
#include "storage/token_store.h"

namespace metrics::storage::pg {
class RetentionLoop;
class SealerLoop;
}  // namespace metrics::storage::pg

namespace metrics::server {

class MetricsServer {
 public:
  // Connects to the database and checks its schema: FAILED_PRECONDITION
  // naming the pending migrations when it is not current (unless
  // options.migrate, which applies them first), or when it was migrated by
  // a release this one does not know. Then binds both addresses and starts
  // serving. `log` receives one line per notable startup event.
  static absl::StatusOr<std::unique_ptr<MetricsServer>> Create(
      ServerOptions options,
      const std::function<void(absl::string_view)>& log);
  // As Create, on a store the caller made from options.store and
  // options.database_url (tests wrap the real one to inject faults).
  static absl::StatusOr<std::unique_ptr<MetricsServer>> CreateOnStore(
      ServerOptions options, std::unique_ptr<storage::MetricStore> store,
      const std::function<void(absl::string_view)>& log);
  ~MetricsServer();

  MetricsServer(const MetricsServer&) = delete;
  MetricsServer& operator=(const MetricsServer&) = delete;

  int grpc_port() const { return grpc_port_; }
  int http_port() const { return http_->port(); }
  const LegacyStatistics& legacy_statistics() const { return legacy_statistics_; }
  const TrialMetricsStatistics& trial_metrics_statistics() const {
    return trial_metrics_statistics_;
  }

  // Marks the server NOT_SERVING, lets in-flight RPCs finish for up to
  // `grace`, then stops gRPC and HTTP, and lets the ingest writer commit what
  // it holds (again up to `grace`). Idempotent.
  void Shutdown(absl::Duration grace);

 private:
  MetricsServer() = default;

  std::unique_ptr<storage::MetricStore> store_;
  // Null when authentication is off.
  std::unique_ptr<storage::TokenStore> token_store_;
  std::unique_ptr<PeerLimiter> peer_limiter_;
  std::unique_ptr<Authenticator> authenticator_;
  // Goes after every stream (gRPC and HTTP stop first, below).
  std::unique_ptr<CredentialWatch> credential_watch_;
  std::unique_ptr<CallGuard> guard_;
  bool metrics_public_ = true;
  ServiceStatistics statistics_;
  std::unique_ptr<common::BlockingExecutor> executor_;
  std::unique_ptr<common::BlockingExecutor> open_executor_;
  std::unique_ptr<TrialService> trial_service_;
  std::unique_ptr<TokenService> token_service_;
  std::unique_ptr<IngestService> ingest_service_;
  std::unique_ptr<query::QueryEngine> query_engine_;
  std::unique_ptr<query::QueryEngine> follow_engine_;  // reads the primary
  std::unique_ptr<QueryService> query_service_;
  LegacyStatistics legacy_statistics_;
  std::unique_ptr<LegacyProfilerService> legacy_service_;
  TrialMetricsStatistics trial_metrics_statistics_;
  std::unique_ptr<TrialMetricsService> trial_metrics_service_;
  std::unique_ptr<DeterminedService> determined_service_;
  std::unique_ptr<OtlpService> otlp_service_;
  std::unique_ptr<GatewaySocket> gateway_socket_;
  std::unique_ptr<RestGateway> gateway_;
  std::unique_ptr<WebAssets> web_;  // null when no page is served
  std::unique_ptr<grpc::Server> grpc_;
  std::unique_ptr<HttpPaths> http_paths_;
  std::unique_ptr<HttpServer> http_;
  std::unique_ptr<storage::pg::RetentionLoop> retention_;  // with --raw-retention
  std::unique_ptr<storage::pg::SealerLoop> sealer_;        // unless --seal-every=0
  std::unique_ptr<ReadinessProbe> readiness_;
  int grpc_port_ = 0;
  size_t prometheus_max_series_ = 0;
  absl::Duration stale_after_;
  std::atomic<bool> serving_{false};
  bool shut_down_ = false;
};

}  // namespace metrics::server

#endif  // METRICS_SERVER_METRICS_SERVER_H_
