// metricsd: the profiling metrics service. Reads its configuration from
// flags and the environment, checks the database schema, serves gRPC and
// HTTP, and shuts down gracefully on SIGINT or SIGTERM.
#include <malloc.h>
#include <signal.h>
#include <sys/resource.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <limits>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/command_line.h"
#include "common/database_url.h"
#include "common/logging.h"
#include "common/memory_trimmer.h"
#include "common/stop_signals.h"
#include "server/metrics_server.h"

ABSL_FLAG(std::string, database_url, "",
          "PostgreSQL to use, as a libpq URI or key=value string. Default: "
          "$DATABASE_URL, else libpq's PG* variables (PGHOST, PGPORT, PGUSER, "
          "PGDATABASE, PGPASSWORD).");
ABSL_FLAG(std::string, read_database_url, "",
          "A PostgreSQL streaming-replication hot standby of --database-url "
          "(libpq URI or key=value string). Chart queries, series listings "
          "and trial lists read from it while it lags at most "
          "--max-read-lag; otherwise, or when it does not answer, from the "
          "primary (counted in /metrics). Ingest, follow and everything that "
          "writes use the primary. Default: $READ_DATABASE_URL; empty: every "
          "read on the primary.");
ABSL_FLAG(absl::Duration, max_read_lag, absl::Seconds(5),
          "How far --read-database-url may be behind the primary (checked "
          "every second) and still serve reads.");
ABSL_FLAG(std::string, grpc_address, "127.0.0.1:8081",
          "host:port to serve gRPC on; port 0 picks a free port, printed at "
          "start.");
ABSL_FLAG(std::string, http_address, "127.0.0.1:8080",
          "host:port to serve HTTP (/healthz, REST API) on; port 0 picks a "
          "free port, printed at start.");
ABSL_FLAG(bool, migrate, false,
          "Apply pending database migrations at start. Without it, metricsd "
          "refuses to start on a schema that is not current.");
ABSL_FLAG(absl::Duration, shutdown_grace, absl::Seconds(10),
          "On SIGINT/SIGTERM, how long in-flight calls may take to finish.");
ABSL_FLAG(int, http_max_connections, 8192,
          "HTTP connections open at once; at the limit a new connection "
          "closes the one that has waited longest for a request.");
ABSL_FLAG(absl::Duration, http_idle_timeout, absl::Seconds(60),
          "An HTTP connection waiting this long for its next request is "
          "closed.");
ABSL_FLAG(absl::Duration, http_header_timeout, absl::Seconds(10),
          "Time a client has to send a request's headers.");
ABSL_FLAG(absl::Duration, http_body_timeout, absl::Seconds(30),
          "Time a client has to send a request's body.");
ABSL_FLAG(int, http_handler_threads, 16,
          "Threads that run HTTP requests (more wait in a bounded queue, "
          "then get 503).");
ABSL_FLAG(int, http_max_streams, 4096,
          "Streamed HTTP answers (follow, export) open at once; more get "
          "503. A stream holds no thread; each costs memory "
          "(docs/operating.md, \"Followers\").");
ABSL_FLAG(int64_t, http_max_body_bytes, 16 << 20,
          "Largest HTTP request body accepted (larger ones get 413).");
ABSL_FLAG(absl::Duration, http_request_timeout, absl::Seconds(30),
          "Deadline of a unary REST call (streams run until they end).");
ABSL_FLAG(std::string, cors_origin, "",
          "Allow cross-origin REST calls from this origin (\"*\" for any); "
          "empty allows none.");
ABSL_FLAG(std::string, web_root, METRICSD_WEB_ROOT,
          "The profiler page's files (the project's web/ folder, with uPlot "
          "installed by npm); served at / and /ui/. Empty serves no page.");
ABSL_FLAG(std::string, grafana_url, "",
          "Grafana's address (e.g. http://localhost:3000): the profiler page "
          "links each trial to the provisioned dashboard there. Empty: no "
          "link.");
ABSL_FLAG(int, writer_lanes, 2,
          "Ingest writer threads, each with its own database connection, "
          "committing batches in groups.");
ABSL_FLAG(int64_t, ingest_queue_values, 4000000,
          "Values waiting for the database, at most; beyond it clients are "
          "told RESOURCE_EXHAUSTED with a retry hint (about 40 bytes each).");
ABSL_FLAG(int, max_series_per_trial, 10000,
          "Distinct series one trial may have.");
ABSL_FLAG(int64_t, prometheus_max_series, 10000,
          "GET /metrics exports the latest values of at most this many "
          "series of active trials (newest trials first).");
ABSL_FLAG(absl::Duration, stale_after, absl::Seconds(15),
          "An agent of an active trial that has sent nothing for this long "
          "is marked stale on the page and its series leave GET /metrics.");
ABSL_FLAG(std::string, raw_retention, "",
          "Remove raw system rows older than this (\"30d\", \"720h\") at "
          "start and every hour; their rollups stay, so charts of those "
          "windows load from 60 s buckets up, marked \"raw data expired\". "
          "Default: keep raw rows forever. metricsctl retention apply does "
          "the same on demand.");
ABSL_FLAG(absl::Duration, seal_every, absl::Minutes(1),
          "Seal closed windows of raw system rows at start and this often: "
          "each agent's 10-minute window of reports becomes one compressed "
          "row, a third of the space (docs/storage.md, \"Sealed windows\"), "
          "and its reports go into the rollups. Several servers share the "
          "work. 0 turns it off: charts then aggregate the raw rows, slower "
          "the longer the run (metricsctl seal does it on demand).");
ABSL_FLAG(int64_t, seal_memory, int64_t{32} << 20,
          "Bytes one seal transaction may hold, about: a window holding more "
          "reports (an agent reporting thousands of times a second) is sealed "
          "in parts, each a row (docs/storage.md, \"Sealed windows\").");
ABSL_FLAG(int64_t, seal_after_reports, 2000,
          "An agent with this many raw rows waiting (stored by this server) "
          "is sealed at once, open window and all, so that charts aggregate "
          "few raw rows however densely it reports; with four times as many "
          "waiting and none sealed for a quarter of a second, its batches are refused "
          "(RESOURCE_EXHAUSTED, retry in 200 ms). 0: seal only closed "
          "windows, never refuse.");
ABSL_FLAG(int, max_exports, 8,
          "Exports (CSV and trace downloads) running at once, each with a "
          "thread, a database connection and a page of each agent's reports; "
          "more are refused (RESOURCE_EXHAUSTED, 429 over HTTP).");
ABSL_FLAG(int64_t, series_cache, 200000,
          "Series ids each ingest writer lane keeps in memory (about 35 bytes "
          "each); past it the cache starts again empty and a miss costs a "
          "look-up.");
ABSL_FLAG(int64_t, max_tracked_streams, 100000,
          "Streams and agents remembered between batches: each stream's "
          "writer lane, each agent's rows waiting for the sealer (about 100 "
          "bytes each); past it idle ones are forgotten.");
ABSL_FLAG(int64_t, grpc_max_message_bytes, 32 << 20,
          "The largest gRPC request accepted; larger ones fail "
          "RESOURCE_EXHAUSTED.");
ABSL_FLAG(int64_t, grpc_memory, int64_t{1} << 30,
          "Bytes gRPC may hold for calls in progress before it pushes back "
          "on clients (flow control).");
ABSL_FLAG(absl::Duration, max_future, absl::Minutes(10),
          "How far ahead of the server's clock a report's time may be.");
ABSL_FLAG(int, db_pool_size, 4,
          "Database connections for calls other than ingest.");
ABSL_FLAG(std::string, auth, "required",
          "\"required\": every call but health needs an API token "
          "(authorization: Bearer <token>; see metricsctl tokens). \"off\": "
          "no checks, for a private test bench (logs a warning).");
ABSL_FLAG(absl::Duration, auth_recheck, absl::Seconds(4),
          "How long a token's check is trusted before the database is asked "
          "again: a revoked token stops working within this for new calls, "
          "and within this and half a second for open streams (ingest, "
          "follows), on every metricsd.");
ABSL_FLAG(int, auth_failure_burst, 20,
          "Failed authentications an address may make in a row; past them "
          "its attempts without a token this server knows to be usable are "
          "refused 429 / RESOURCE_EXHAUSTED (with Retry-After) before any "
          "look-up, until it earns more (--auth-failure-refill). 0: no limit.");
ABSL_FLAG(absl::Duration, auth_failure_refill, absl::Seconds(1),
          "A limited address earns one more attempt per this.");
ABSL_FLAG(std::vector<std::string>, auth_limit_exempt, {},
          "Addresses never limited, comma-separated (\"127.0.0.1,::1\"; an "
          "IPv6 network as \"2001:db8:1:2::/64\", the unit the limit counts "
          "by). Loopback is limited unless named here.");
ABSL_FLAG(int64_t, auth_refused_cache, 100000,
          "Refused tokens remembered (about 100 bytes each), so repeating one "
          "costs no database look-up.");
ABSL_FLAG(absl::Duration, auth_refused_lifetime, absl::Minutes(1),
          "How long a refused token is remembered.");
ABSL_FLAG(std::string, tls_cert, "",
          "Serve gRPC and HTTP over TLS with this certificate chain (PEM); "
          "needs --tls-key.");
ABSL_FLAG(std::string, tls_key, "",
          "The private key (PEM) of --tls-cert.");
ABSL_FLAG(std::string, tls_client_ca, "",
          "Require clients to present a certificate signed by these CAs "
          "(PEM): mutual TLS, on the gRPC and the HTTP port (see "
          "--tls-client-ca-on-http).");
ABSL_FLAG(bool, tls_client_ca_on_http, true,
          "With --tls-client-ca: ask HTTP clients (the page, REST, OTLP, "
          "/metrics) for a certificate too. false: only gRPC clients must "
          "present one, for browsers without client certificates.");
ABSL_FLAG(bool, insecure_listen, false,
          "With --auth=required and no TLS, listen on a non-loopback address "
          "anyway (tokens then cross the network in plaintext). Without it "
          "metricsd refuses to.");
ABSL_FLAG(bool, metrics_public, false,
          "With --auth=required, serve GET /metrics without a token.");

namespace {

// Each agent's stream and each open follow holds a descriptor: thousands
// of them pass the soft limit a login shell customarily gives (1024), so
// metricsd takes the hard limit, as Go's runtime does for its servers.
void RaiseDescriptorLimit() {
  rlimit limit;
  if (getrlimit(RLIMIT_NOFILE, &limit) == 0 && limit.rlim_cur < limit.rlim_max) {
    limit.rlim_cur = limit.rlim_max;
    setrlimit(RLIMIT_NOFILE, &limit);
  }
}

int Run() {
  RaiseDescriptorLimit();
  // Before any thread starts, so that only the sigwait below sees them.
  const sigset_t stop_signals = metrics::common::BlockStopSignals();

  metrics::server::ServerOptions options;
  options.database_url =
      metrics::common::ResolveDatabaseUrl(absl::GetFlag(FLAGS_database_url));
  options.grpc_address = absl::GetFlag(FLAGS_grpc_address);
  options.http.address = absl::GetFlag(FLAGS_http_address);
  options.http.max_connections = absl::GetFlag(FLAGS_http_max_connections);
  options.http.idle_timeout = absl::GetFlag(FLAGS_http_idle_timeout);
  options.http.header_timeout = absl::GetFlag(FLAGS_http_header_timeout);
  options.http.body_timeout = absl::GetFlag(FLAGS_http_body_timeout);
  options.http.handler_threads = absl::GetFlag(FLAGS_http_handler_threads);
  options.http.max_streams = absl::GetFlag(FLAGS_http_max_streams);
  options.http.max_body_bytes =
      static_cast<size_t>(absl::GetFlag(FLAGS_http_max_body_bytes));
  options.gateway.request_timeout = absl::GetFlag(FLAGS_http_request_timeout);
  options.gateway.cors_origin = absl::GetFlag(FLAGS_cors_origin);
  options.web.root = absl::GetFlag(FLAGS_web_root);
  options.web.grafana_url = absl::GetFlag(FLAGS_grafana_url);
  options.migrate = absl::GetFlag(FLAGS_migrate);
  options.store.pool_size = absl::GetFlag(FLAGS_db_pool_size);
  options.store.writer.lanes = absl::GetFlag(FLAGS_writer_lanes);
  options.store.writer.max_queued_values =
      static_cast<size_t>(absl::GetFlag(FLAGS_ingest_queue_values));
  options.store.limits.max_series_per_trial =
      absl::GetFlag(FLAGS_max_series_per_trial);
  options.store.limits.max_future = absl::GetFlag(FLAGS_max_future);
  options.store.writer.max_cached_series =
      static_cast<size_t>(std::max<int64_t>(0, absl::GetFlag(FLAGS_series_cache)));
  options.store.writer.max_routes =
      static_cast<size_t>(std::max<int64_t>(0, absl::GetFlag(FLAGS_max_tracked_streams)));
  options.max_exports = absl::GetFlag(FLAGS_max_exports);
  options.max_message_bytes = static_cast<int>(std::clamp<int64_t>(
      absl::GetFlag(FLAGS_grpc_max_message_bytes), 0, std::numeric_limits<int>::max()));
  options.grpc_memory_bytes =
      static_cast<size_t>(std::max<int64_t>(0, absl::GetFlag(FLAGS_grpc_memory)));
  options.store.read.database_url = absl::GetFlag(FLAGS_read_database_url);
  if (const char* env = std::getenv("READ_DATABASE_URL");
      options.store.read.database_url.empty() && env != nullptr) {
    options.store.read.database_url = env;  // keeps a password out of ps
  }
  options.store.read.max_lag = absl::GetFlag(FLAGS_max_read_lag);
  options.stale_after = absl::GetFlag(FLAGS_stale_after);
  options.prometheus_max_series =
      static_cast<size_t>(std::max<int64_t>(0, absl::GetFlag(FLAGS_prometheus_max_series)));
  const auto usage_error = [](const absl::Status& status) {
    std::cerr << "metricsd: error: " << status.message() << "\n";
    return 2;
  };
  absl::StatusOr<absl::Duration> retention =
      metrics::server::ParseRawRetention(absl::GetFlag(FLAGS_raw_retention));
  if (!retention.ok()) return usage_error(retention.status());
  options.raw_retention = *retention;
  options.seal_every = absl::GetFlag(FLAGS_seal_every);
  options.seal_memory_bytes = absl::GetFlag(FLAGS_seal_memory);
  options.seal_after_reports = absl::GetFlag(FLAGS_seal_after_reports);
  if (options.seal_memory_bytes < (int64_t{1} << 20)) {
    return usage_error(absl::InvalidArgumentError(
        absl::StrCat("--seal-memory ", options.seal_memory_bytes,
                     ": must be at least 1 MiB (1048576 bytes)")));
  }
  if (options.seal_after_reports < 0) {
    return usage_error(absl::InvalidArgumentError(
        absl::StrCat("--seal-after-reports ", options.seal_after_reports,
                     ": must not be negative (0 seals closed windows only)")));
  }
  if (options.seal_every < absl::ZeroDuration()) {
    return usage_error(absl::InvalidArgumentError(
        absl::StrCat("--seal_every ", absl::FormatDuration(options.seal_every),
                     ": must not be negative (0 turns the sealer off)")));
  }
  absl::StatusOr<bool> auth_required =
      metrics::server::ParseAuthRequired(absl::GetFlag(FLAGS_auth));
  if (!auth_required.ok()) return usage_error(auth_required.status());
  options.auth_required = *auth_required;
  options.metrics_public = absl::GetFlag(FLAGS_metrics_public);
  options.auth_recheck = absl::GetFlag(FLAGS_auth_recheck);
  options.auth_failure_burst = absl::GetFlag(FLAGS_auth_failure_burst);
  options.auth_failure_refill = absl::GetFlag(FLAGS_auth_failure_refill);
  options.auth_limit_exempt = absl::GetFlag(FLAGS_auth_limit_exempt);
  options.auth_refused_cache =
      static_cast<size_t>(std::max<int64_t>(0, absl::GetFlag(FLAGS_auth_refused_cache)));
  options.auth_refused_lifetime = absl::GetFlag(FLAGS_auth_refused_lifetime);
  options.tls.cert = absl::GetFlag(FLAGS_tls_cert);
  options.tls.key = absl::GetFlag(FLAGS_tls_key);
  options.tls.client_ca = absl::GetFlag(FLAGS_tls_client_ca);
  options.client_ca_on_http = absl::GetFlag(FLAGS_tls_client_ca_on_http);
  options.insecure_listen = absl::GetFlag(FLAGS_insecure_listen);
  if (absl::Status s = metrics::server::CheckServerOptions(options); !s.ok()) {
    return usage_error(s);
  }

  absl::StatusOr<std::unique_ptr<metrics::server::MetricsServer>> server =
      metrics::server::MetricsServer::Create(
          options, [](absl::string_view event) {
            metrics::common::LogInfo(event);
          });
  if (!server.ok()) {
    std::cerr << "metricsd: error: " << server.status().message() << "\n";
    return 1;
  }
  if (!options.auth_required) {
    metrics::common::LogInfo(
        "warning: --auth=off: every caller may read, write and end any "
        "trial; run on a private network only");
  }
  const auto host = [](const std::string& address) {
    return address.substr(0, address.rfind(':'));
  };
  // Printed on stdout so scripts and tests can read the chosen ports.
  const bool tls = !options.tls.cert.empty();
  std::cout << "metricsd: gRPC listening on " << host(options.grpc_address)
            << ":" << (*server)->grpc_port() << (tls ? " (TLS)" : "") << "\n"
            << "metricsd: HTTP listening on " << (tls ? "https://" : "http://")
            << host(options.http.address) << ":" << (*server)->http_port()
            << " (health: /healthz"
            << (options.web.root.empty() ? "" : "; profiler page: /") << ")"
            << std::endl;
  metrics::common::LogInfo("metricsd serving");
  // Streams come and go by the thousand; see memory_trimmer.h.
  const metrics::common::MemoryTrimmer trimmer(absl::Seconds(10));

  const int signal_number = metrics::common::WaitForStopSignal(stop_signals);
  metrics::common::LogInfo("received ", strsignal(signal_number),
                           ", shutting down");
  (*server)->Shutdown(absl::GetFlag(FLAGS_shutdown_grace));
  metrics::common::LogInfo("metricsd stopped");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  // glibc gives each busy thread a malloc arena of its own (up to 8 per
  // core), and each arena keeps its high-water mark: with metricsd's ~100
  // threads passing short-lived buffers around, RSS ratcheted up for the
  // whole of a 10-minute overload soak (75 to 118 MB) and stayed flat with
  // two arenas (docs/benchmarks.md, "Memory at thousands of streams").
  // MALLOC_ARENA_MAX, when set, still wins.
  if (std::getenv("MALLOC_ARENA_MAX") == nullptr) mallopt(M_ARENA_MAX, 2);
#ifdef NDEBUG
  // Debian's Abseil is built as a debug build, so absl::Mutex checks every
  // lock for a lock-order cycle, under one lock shared by all threads: 3 %
  // of metricsd's CPU with 5000 agents reporting (docs/benchmarks.md,
  // "Ingest: bench/ingest.sh"). A release metricsd skips it, as with
  // Abseil's own release builds; ThreadSanitizer still sees lock orders.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
#endif
  absl::SetProgramUsageMessage(
      "the profiling metrics service.\n\n"
      "Usage: metricsd [--database-url URL] [--grpc-address HOST:PORT] "
      "[--http-address HOST:PORT] [--tls-cert FILE --tls-key FILE] "
      "[--migrate]\n\n"
      "Serves gRPC and HTTP (the profiler page at /, the REST API under "
      "/api/v1/, GET /healthz, GET /metrics) "
      "until SIGINT or SIGTERM. Every call but health needs an API token "
      "(metricsctl tokens create); beyond loopback, TLS too.");
  metrics::common::ListFlagsInHelp("server/main.cc");
  std::vector<char*> args = metrics::common::DashedFlagsToUnderscores(argc, argv);
  absl::ParseCommandLine(static_cast<int>(args.size()), args.data());
  return Run();
}
