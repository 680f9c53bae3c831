#include "server/metrics_server.h"

#include <grpcpp/create_channel.h>
#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <grpcpp/health_check_service_interface.h>
#include <grpcpp/resource_quota.h>
#include <grpcpp/security/credentials.h>
#include <grpcpp/security/server_credentials.h>
#include <grpcpp/server_builder.h>

#include <string>
#include <tuple>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "common/status_macros.h"
#include "common/tls_files.h"
#include "migrations/migrator.h"
#include "server/auth/access_rules.h"
#include "storage/pg/connection.h"
#include "storage/pg/jobs/raw_retention.h"
#include "storage/pg/jobs/sealer.h"
#include "storage/pg/pg_metric_store.h"
#include "storage/pg/pg_token_store.h"

namespace metrics::server {

namespace {

using migrations::MigrationLabel;
using migrations::MigrationState;

// Applies pending migrations if asked to, then refuses a schema that is not
// exactly the one this binary was built for.
absl::Status CheckSchema(const ServerOptions& options,
                         const std::function<void(absl::string_view)>& log) {
  migrations::MigratorOptions migrator_options;
  migrator_options.database_url = options.database_url;
  migrator_options.on_progress = log;
  migrator_options.application_name = "metricsd";
  ASSIGN_OR_RETURN(auto migrator,
                   migrations::Migrator::Create(std::move(migrator_options)));
  if (options.migrate) {
    ASSIGN_OR_RETURN(std::vector<MigrationState> applied, migrator->Up());
    for (const MigrationState& s : applied) {
      log(absl::StrCat("applied migration ", MigrationLabel(s.version, s.name)));
    }
  }
  ASSIGN_OR_RETURN(std::vector<MigrationState> states, migrator->Status());
  std::vector<std::string> pending;
  for (const MigrationState& s : states) {
    switch (s.state) {
      case MigrationState::State::kApplied:
        break;
      case MigrationState::State::kPending:
        pending.push_back(MigrationLabel(s.version, s.name));
        break;
      case MigrationState::State::kChanged:
      case MigrationState::State::kUnknown:
        return absl::FailedPreconditionError(absl::StrCat(
            "the database schema does not match this metricsd: migration ",
            MigrationLabel(s.version, s.name), " is ",
            s.state == MigrationState::State::kChanged
                ? "recorded with another checksum"
                : "applied but unknown to this release",
            "; see \"metricsctl migrate status\""));
    }
  }
  if (!pending.empty()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "the database schema is not current: ", pending.size(),
        " migration(s) pending (", absl::StrJoin(pending, ", "),
        "); run \"metricsctl migrate up\" or start metricsd with --migrate"));
  }
  return absl::OkStatus();
}

// Every service metricsd serves.
absl::StatusOr<std::vector<const google::protobuf::ServiceDescriptor*>> ServedServices() {
  std::vector<const google::protobuf::ServiceDescriptor*> services;
  for (const char* name :
       {v1::TrialService::service_full_name(), v1::TokenService::service_full_name(),
        v1::IngestService::service_full_name(), v1::QueryService::service_full_name(),
        determined::api::v1::Determined::service_full_name(),
        opentelemetry::proto::collector::metrics::v1::MetricsService::service_full_name(),
        "grpc.health.v1.Health", "grpc.reflection.v1alpha.ServerReflection"}) {
    const google::protobuf::ServiceDescriptor* service =
        google::protobuf::DescriptorPool::generated_pool()->FindServiceByName(name);
    if (service == nullptr) {
      return absl::InternalError(absl::StrCat("service ", name, " is not linked in"));
    }
    services.push_back(service);
  }
  return services;
}

}  // namespace

absl::StatusOr<std::unique_ptr<MetricsServer>> MetricsServer::Create(
    ServerOptions options,
    const std::function<void(absl::string_view)>& log) {
  storage::pg::PgMetricStoreOptions store_options = options.store;
  store_options.database_url = options.database_url;
  if (!store_options.read.on_change) {
    store_options.read.on_change = [log](const std::string& line) {
      log(line);
    };
  }
  if (options.seal_every > absl::ZeroDuration() && options.seal_after_reports > 0 &&
      options.seal_trigger == nullptr) {
    options.seal_trigger =
        std::make_shared<storage::pg::SealTrigger>(
            options.seal_after_reports, absl::Milliseconds(250), store_options.writer.max_routes);
    store_options.writer.on_stored = [trigger = options.seal_trigger](
                                         int32_t trial, const std::string& agent,
                                         int64_t reports) {
      trigger->Stored(trial, agent, reports);
    };
    store_options.writer.admit = [trigger = options.seal_trigger](int32_t trial,
                                                                 const std::string& agent) {
      return trigger->Admit(trial, agent);
    };
  }
  std::unique_ptr<storage::MetricStore> store =
      storage::pg::PgMetricStore::Create(std::move(store_options));
  return CreateOnStore(std::move(options), std::move(store), log);
}

absl::StatusOr<std::unique_ptr<MetricsServer>> MetricsServer::CreateOnStore(
    ServerOptions options, std::unique_ptr<storage::MetricStore> store,
    const std::function<void(absl::string_view)>& log) {
  // Default deny, checked before anything opens or listens: a method
  // without its access rule would be refused to every caller.
  ASSIGN_OR_RETURN(const auto served, ServedServices());
  RETURN_IF_ERROR(CheckAccessRules(served));
  ASSIGN_OR_RETURN(const auto grpc_host_port,
                   ParseHostPort("--grpc-address", options.grpc_address));
  ASSIGN_OR_RETURN(const auto http_host_port,
                   ParseHostPort("--http-address", options.http.address));
  ASSIGN_OR_RETURN(const common::ServerTlsPem tls,
                   common::ReadServerTls(options.tls));
  if (options.auth_required && !tls.enabled() && !options.insecure_listen) {
    for (const auto& [flag, address, host] :
         {std::tuple("--grpc-address", options.grpc_address,
                     grpc_host_port.first),
          std::tuple("--http-address", options.http.address,
                     http_host_port.first)}) {
      if (!IsLoopbackHost(host)) {
        return absl::InvalidArgumentError(absl::StrCat(
            flag, " ", address,
            ": not a loopback address, and without TLS the API tokens "
            "would cross the network in plaintext; give --tls-cert and "
            "--tls-key, or --insecure-listen to accept that"));
      }
    }
  }
  options.http.tls_cert_pem = tls.cert;
  options.http.tls_key_pem = tls.key;
  if (options.client_ca_on_http) options.http.tls_client_ca_pem = tls.client_ca;
  std::unique_ptr<WebAssets> web;
  if (!options.web.root.empty()) {
    ASSIGN_OR_RETURN(web, WebAssets::Create(options.web));
  }
  if (const std::string& read = options.store.read.database_url; !read.empty()) {
    // Refused here rather than logged by the standby's monitor: a typo.
    if (absl::StatusOr<std::string> parsed =
            storage::pg::WithConnectionOptions(read, {});
        !parsed.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--read-database-url: ", parsed.status().message()));
    }
  }
  RETURN_IF_ERROR(CheckSchema(options, log));

  std::unique_ptr<MetricsServer> server(new MetricsServer());
  server->web_ = std::move(web);
  server->store_ = std::move(store);
  if (options.auth_required) {
    server->token_store_ =
        std::make_unique<storage::pg::PgTokenStore>(options.database_url);
    PeerLimiterOptions limit;
    limit.burst = options.auth_failure_burst;
    limit.refill = options.auth_failure_refill;
    limit.exempt = options.auth_limit_exempt;
    server->peer_limiter_ = std::make_unique<PeerLimiter>(limit);
    AuthenticatorOptions auth;
    auth.recheck = options.auth_recheck;
    auth.max_refused = options.auth_refused_cache;
    auth.refused_lifetime = options.auth_refused_lifetime;
    auth.log = log;
    server->authenticator_ = std::make_unique<Authenticator>(
        server->token_store_.get(), auth, server->peer_limiter_.get());
    server->credential_watch_ = std::make_unique<CredentialWatch>(
        server->authenticator_.get(), options.auth_stream_tick);
    server->guard_ = std::make_unique<CallGuard>(
        server->authenticator_.get(), server->credential_watch_.get());
    server->metrics_public_ = options.metrics_public;
  }
  const CallGuard* guard = server->guard_.get();
  server->executor_ = std::make_unique<common::BlockingExecutor>(
      options.executor_threads, options.executor_queue);
  server->open_executor_ = std::make_unique<common::BlockingExecutor>(
      options.open_threads, options.open_queue);
  server->trial_service_ = std::make_unique<TrialService>(
      server->store_.get(), server->executor_.get(), guard,
      options.stale_after);
  server->token_service_ = std::make_unique<TokenService>(
      server->token_store_.get(), server->executor_.get(), guard);
  server->ingest_service_ = std::make_unique<IngestService>(
      server->store_.get(), server->executor_.get(),
      server->open_executor_.get(), options.ingest, &server->statistics_, guard);
  server->query_engine_ = std::make_unique<query::QueryEngine>(
      &server->store_->Reads(), options.query);
  // Follow reads the primary: a standby's lag could take its answers back
  // in time.
  query::QueryOptions follow_query = options.query;
  follow_query.side_read_threads = 0;  // follow makes no summaries
  server->follow_engine_ = std::make_unique<query::QueryEngine>(
      &server->store_->PrimaryReads(), follow_query);
  server->query_service_ = std::make_unique<QueryService>(
      server->query_engine_.get(), server->follow_engine_.get(),
      server->store_.get(), server->executor_.get(), options.follow,
      &server->statistics_, guard, options.max_exports);

  if (options.raw_retention != absl::InfiniteDuration()) {
    storage::pg::RetentionOptions retention;
    retention.database_url = options.database_url;
    retention.raw_retention = options.raw_retention;
    server->retention_ = std::make_unique<storage::pg::RetentionLoop>(
        std::move(retention), options.retention_every,
        [log](const std::string& event) { log(event); });
  }
  if (options.seal_every > absl::ZeroDuration()) {
    storage::pg::SealOptions seal;
    seal.database_url = options.database_url;
    seal.application_name = "metricsd-sealer";
    seal.memory_budget_bytes = options.seal_memory_bytes;
    server->sealer_ = std::make_unique<storage::pg::SealerLoop>(
        std::move(seal), options.seal_every, options.seal_trigger,
        [log](const std::string& event) { log(event); });
  }
  server->prometheus_max_series_ = options.prometheus_max_series;
  server->stale_after_ = options.stale_after;
  server->legacy_service_ = std::make_unique<LegacyProfilerService>(
      server->store_.get(), &server->legacy_statistics_, options.store.limits,
      guard, server->executor_.get());

  server->trial_metrics_service_ = std::make_unique<TrialMetricsService>(
      server->store_.get(), server->executor_.get(), options.store.limits,
      options.ingest.retry_after, guard, &server->trial_metrics_statistics_);
  server->determined_service_ = std::make_unique<DeterminedService>(
      server->trial_metrics_service_.get(), server->legacy_service_.get());

  server->otlp_service_ = std::make_unique<OtlpService>(
      server->store_.get(), server->executor_.get(), options.store.limits,
      options.ingest.retry_after, guard);

  grpc::EnableDefaultHealthCheckService(true);
  // Server reflection lets operators list and call services with grpcurl or
  // grpc_cli. gRPC also needs at least one service registered at build time;
  // the default health service is only added when the server starts.
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  ASSIGN_OR_RETURN(server->gateway_socket_, GatewaySocket::Create());
  grpc::ServerBuilder builder;
  builder.AddListeningPort(options.grpc_address,
                           tls.enabled() ? common::GrpcServerCredentials(tls)
                                         : grpc::InsecureServerCredentials(),
                           &server->grpc_port_);
  builder.AddListeningPort(server->gateway_socket_->target(),
                           grpc::InsecureServerCredentials());
  builder.RegisterService(server->trial_service_.get());
  builder.RegisterService(server->token_service_.get());
  builder.RegisterService(server->ingest_service_.get());
  builder.RegisterService(server->query_service_.get());
  builder.RegisterService(server->determined_service_.get());
  builder.RegisterService(server->otlp_service_.get());
  builder.SetMaxReceiveMessageSize(options.max_message_bytes);
  // Clients ping every 30 s or more to find a vanished server
  // (client/reporter.cc); gRPC's default refuses pings under 5 min apart.
  builder.AddChannelArgument(GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS,
                             10000);
  // Two of gRPC's filters are left out: each keeps state in every call,
  // 0.5 KB of each open stream together (docs/benchmarks.md, "Memory at
  // thousands of streams"). Compressed
  // messages are still decompressed as they are read, and the size limit
  // applies to them decompressed (IngestServiceTest); a client's deadline
  // still reaches handlers (CallDeadline), and the client cancels at it.
  builder.AddChannelArgument(GRPC_ARG_ENABLE_DEADLINE_CHECKS, 0);
  builder.AddChannelArgument(GRPC_ARG_ENABLE_PER_MESSAGE_COMPRESSION, 0);
  grpc::ResourceQuota quota("metricsd");
  quota.Resize(options.grpc_memory_bytes);
  builder.SetResourceQuota(quota);
  server->grpc_ = builder.BuildAndStart();
  if (server->grpc_ == nullptr || server->grpc_port_ == 0) {
    return absl::UnavailableError(absl::StrCat(
        "--grpc-address ", options.grpc_address,
        ": cannot listen (address in use or not local?)"));
  }
  RestGatewayOptions gateway_options = options.gateway;
  gateway_options.deprecation_headers = {
      {"Deprecation", std::string(kLegacyDeprecationDate)},
      {"Link", LegacySuccessorLink("/api/v1/trials")}};
  gateway_options.guard = server->guard_.get();
  // The unary methods, which REST calls in this process; server streams go
  // over the private socket.
  std::vector<const UnaryMethod*> unary_methods;
  for (const auto& served :
       {server->trial_service_->UnaryMethodsServed(),
        server->token_service_->UnaryMethodsServed(),
        server->query_service_->UnaryMethodsServed(),
        server->ingest_service_->UnaryMethodsServed(),
        std::vector<const UnaryMethod*>{server->trial_metrics_service_->report_method(),
                                        server->legacy_service_->post_method(),
                                        server->otlp_service_->export_method()}}) {
    unary_methods.insert(unary_methods.end(), served.begin(), served.end());
  }
  UnaryMethods unary;
  for (const UnaryMethod* method : unary_methods) unary[method->name] = method;
  grpc::ChannelArguments channel_arguments;
  channel_arguments.SetMaxReceiveMessageSize(-1);  // chart answers are large
  ASSIGN_OR_RETURN(
      server->gateway_,
      RestGateway::Create(
          grpc::CreateCustomChannel(server->gateway_socket_->target(),
                                    grpc::InsecureChannelCredentials(),
                                    channel_arguments),
          {v1::TrialService::service_full_name(),
           v1::TokenService::service_full_name(),
           v1::IngestService::service_full_name(),
           v1::QueryService::service_full_name(),
           determined::api::v1::Determined::service_full_name()},
          std::move(gateway_options), std::move(unary)));
  HttpServerOptions http_options = options.http;
  http_options.inline_paths = {"/healthz", "/livez"};
  http_options.decorate_error = [gateway = server->gateway_.get()](
                                    absl::string_view path, HttpResponse& r) {
    gateway->AddDeprecationHeaders(path, r);
  };
  HttpPathsOptions paths;
  paths.web = server->web_.get();
  paths.gateway = server->gateway_.get();
  paths.store = server->store_.get();
  paths.metrics_guard = server->metrics_public_ ? nullptr : server->guard_.get();
  paths.guard = server->guard_.get();
  paths.statistics = &server->statistics_;
  paths.unary_methods = unary_methods;
  paths.legacy_statistics = &server->legacy_statistics_;
  paths.trial_metrics_statistics = &server->trial_metrics_statistics_;
  paths.authenticator = server->authenticator_.get();
  paths.prometheus_max_series = server->prometheus_max_series_;
  paths.stale_after = server->stale_after_;
  paths.unready_reason = [s = server.get()]() -> const char* {
    if (!s->serving_) return "shutting down";
    absl::StatusCode code = absl::StatusCode::kOk;
    if (s->readiness_ != nullptr && !s->readiness_->Ready(nullptr, &code)) {
      return code == absl::StatusCode::kFailedPrecondition
                 ? "no primary database (the servers that answer are standbys)"
                 : "database unreachable";
    }
    return nullptr;
  };
  server->http_paths_ = std::make_unique<HttpPaths>(std::move(paths));
  ASSIGN_OR_RETURN(server->http_,
                   HttpServer::Start(std::move(http_options),
                                     [p = server->http_paths_.get()](
                                         const HttpRequest& r) {
                                       return p->Handle(r);
                                     }));
  server->serving_ = true;
  server->readiness_ = std::make_unique<ReadinessProbe>(
      server->store_.get(), options.readiness,
      [log, grpc = server->grpc_.get()](bool ready, const std::string& reason) {
        log(ready ? std::string("database reachable again: ready")
                  : "database unreachable, not ready: " + reason);
        if (auto* health = grpc->GetHealthCheckService(); health != nullptr) {
          health->SetServingStatus(ready);
        }
      });
  return server;
}

MetricsServer::~MetricsServer() { Shutdown(absl::ZeroDuration()); }

void MetricsServer::Shutdown(absl::Duration grace) {
  if (shut_down_) return;
  shut_down_ = true;
  serving_ = false;
  readiness_.reset();  // it sets the gRPC health status
  if (grpc_ != nullptr) {
    if (auto* health = grpc_->GetHealthCheckService(); health != nullptr) {
      health->SetServingStatus(false);
    }
    grpc_->Shutdown(absl::ToChronoTime(absl::Now() + grace));
    grpc_->Wait();
  }
  if (http_ != nullptr) http_->Shutdown();
  retention_.reset();
  sealer_.reset();  // stops between transactions
  // In-flight store calls hold pointers into the store: stop them first.
  if (executor_ != nullptr) executor_->Shutdown();
  if (open_executor_ != nullptr) open_executor_->Shutdown();
  if (store_ != nullptr) store_->Shutdown(absl::Now() + grace);
  // Every stream reactor counts itself out of statistics_ as it goes, in
  // OnDone or in the last store callback that holds it. gRPC's Wait orders
  // the first inside libgrpc, out of ThreadSanitizer's sight; reading the
  // counts down to zero orders both, so nothing outlives the members they
  // point into.
  const absl::Time give_up = absl::Now() + absl::Seconds(10);
  while ((statistics_.ingest_streams() > 0 || statistics_.follow_streams() > 0) &&
         absl::Now() < give_up) {
    absl::SleepFor(absl::Milliseconds(1));
  }
}

}  // namespace metrics::server
