// Configuration of metricsd, filled from flags and the environment by
// main.cc and passed to MetricsServer::Create, and the checks of the flag
// values that fill it. Defaults are what a developer running the service on
// their own machine wants.
//
// Thread-safety: a plain value; the functions are pure.
#ifndef METRICS_SERVER_SERVER_OPTIONS_H_
#define METRICS_SERVER_SERVER_OPTIONS_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "common/tls_files.h"
#include "query/query_options.h"
#include "server/http/http_server.h"
#include "server/readiness_options.h"
#include "server/rest/rest_gateway_options.h"
#include "server/services/follow_options.h"
#include "server/services/ingest_stream_options.h"
#include "server/web/web_assets.h"
#include "storage/pg/pg_metric_store_options.h"

namespace metrics::storage::pg {
class SealTrigger;
}  // namespace metrics::storage::pg

namespace metrics::server {

struct ServerOptions {
  // libpq connection string; empty means the PG* environment variables.
  std::string database_url;
  // host:port for gRPC; port 0 picks a free port (see grpc_port()).
  std::string grpc_address = "127.0.0.1:8081";
  // The HTTP side: REST gateway and /healthz. Its address defaults to
  // 127.0.0.1:8080.
  HttpServerOptions http;
  RestGatewayOptions gateway;
  // The profiler page (GET /, /ui/...); an empty web.root serves none.
  WebAssetsOptions web;
  // Apply pending migrations at start instead of refusing to start.
  bool migrate = false;
  // The store: pool, writer lanes and queue, ingest limits. Its
  // database_url is set from the one above.
  storage::pg::PgMetricStoreOptions store;
  IngestStreamOptions ingest;
  query::QueryOptions query;
  FollowOptions follow;
  // Threads (and queue bound) for the blocking work of unary calls.
  int executor_threads = 4;
  size_t executor_queue = 1000;
  // Threads (and queue bound) for opening ingest streams. Agents reconnect
  // together after a restart: their opens wait here, each costing little
  // beside its gRPC call, rather than being refused by the queue above.
  int open_threads = 4;
  size_t open_queue = 20000;
  // Largest gRPC message accepted (a batch of thousands of reports fits).
  int max_message_bytes = 32 << 20;
  // GET /metrics exports the latest values of at most this many series of
  // active trials (newest trials first), to bound Prometheus' cardinality.
  size_t prometheus_max_series = 10000;
  // An agent of an ACTIVE trial that has sent nothing for this long is
  // stale: GetTrial and ListTrials say so and GET /metrics stops
  // exporting its last values. A few times an agent's interval and batch
  // age (1 s each by default), plus a reconnect.
  absl::Duration stale_after = absl::Seconds(15);
  // Raw system rows older than this are removed (their rollups stay), at
  // start and then every `retention_every`; infinite keeps them forever.
  absl::Duration raw_retention = absl::InfiniteDuration();
  absl::Duration retention_every = absl::Hours(1);
  // Closed windows of raw system rows are sealed at start and then this
  // often (storage/pg/jobs/sealer.h); zero turns the sealer off.
  absl::Duration seal_every = absl::Minutes(1);
  // What one seal transaction may hold in memory, about: a window with
  // more is sealed in parts (SealOptions::memory_budget_bytes).
  int64_t seal_memory_bytes = int64_t{32} << 20;
  // An agent with this many raw rows waiting (stored by this server since
  // its last seal) is sealed at once, open window and all (SealTrigger):
  // what charts aggregate at read time stays bounded however densely it
  // reports. 0: windows are sealed only once closed.
  int64_t seal_after_reports = 2000;
  // Exports (ExportSamples, ExportTrace, their REST routes) running at
  // once; more are refused RESOURCE_EXHAUSTED.
  int max_exports = 8;
  // The counter the store's writer feeds and the sealer reads: Create makes
  // it when both of the above are on; a caller of CreateOnStore may make
  // its own and wire options.store.writer.on_stored and .admit to it.
  std::shared_ptr<storage::pg::SealTrigger> seal_trigger;
  // How often readiness (/healthz) asks the database, and when a check
  // that has not answered counts as a failure.
  ReadinessOptions readiness;
  // Memory gRPC may use for calls in progress before it pushes back.
  size_t grpc_memory_bytes = size_t{1} << 30;
  // Whether callers must present an API token (docs/security.md).
  // metricsd's flag defaults to on; tests that are not about tokens leave
  // it off here.
  bool auth_required = false;
  // TLS for the gRPC and HTTP ports (the REST gateway's private socket stays
  // plain); all empty: plaintext.
  common::ServerTlsFiles tls;
  // With tls.client_ca: whether the HTTP port asks for client certificates
  // too (the gRPC port always does).
  bool client_ca_on_http = true;
  // With auth required and no TLS, listen on a non-loopback address anyway
  // (tokens then cross the network in plaintext).
  bool insecure_listen = false;
  // With auth required: GET /metrics without a token.
  bool metrics_public = false;
  // How old a cached token check may be; a revocation takes effect within,
  // for new calls and (plus `auth_stream_tick`) for open streams.
  absl::Duration auth_recheck = absl::Seconds(4);
  absl::Duration auth_stream_tick = absl::Milliseconds(500);
  // Refused tokens remembered, and for how long (AuthenticatorOptions).
  size_t auth_refused_cache = 100000;
  absl::Duration auth_refused_lifetime = absl::Minutes(1);
  // Failed authentications per peer address (PeerLimiterOptions): a burst,
  // then one per `refill`; 0 turns the limit off. Exempt peers as
  // PeerLimiter::KeyOf writes them.
  int auth_failure_burst = 20;
  absl::Duration auth_failure_refill = absl::Seconds(1);
  std::vector<std::string> auth_limit_exempt;
};

// The flag values main.cc cannot take as they are. Each error is
// INVALID_ARGUMENT naming the flag, its value and what it must be
// ("--stale-after 0: must be positive").

// --raw-retention: "" keeps raw rows forever (an infinite duration), else a
// positive duration such as "30d" or "720h".
absl::StatusOr<absl::Duration> ParseRawRetention(absl::string_view text);

// --auth: "required" (true) or "off" (false).
absl::StatusOr<bool> ParseAuthRequired(absl::string_view text);

// The durations flags set that must be positive: --max-read-lag (and
// finite), --stale-after.
absl::Status CheckServerOptions(const ServerOptions& options);

}  // namespace metrics::server

#endif  // METRICS_SERVER_SERVER_OPTIONS_H_
