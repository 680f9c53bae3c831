#include "server/http_paths.h"

#include <optional>
#include <string>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/presented_credential.h"
#include "common/retry_after.h"
#include "server/http/http_error.h"
#include "server/otlp/otlp_body.h"
#include "server/prometheus/prometheus_exporter.h"

namespace metrics::server {

namespace {

// GET /metrics reads the database once; a scrape should not hang on it.
constexpr absl::Duration kPrometheusExportTimeout = absl::Seconds(5);
// Checking an OTLP/HTTP caller's token may read the token table once.
constexpr absl::Duration kOtlpAuthTimeout = absl::Seconds(5);

}  // namespace

HttpResponse HttpPaths::PrometheusExport(const HttpRequest& request) const {
  if (options_.metrics_guard != nullptr) {
    if (absl::Status allowed = options_.metrics_guard->CheckHttp(
            common::PresentedCredential(
                request.Header("authorization"),
                request.Header(common::kAllocationTokenHeader)),
            request.client_address, Access::kRead, "GET /metrics",
            absl::Now() + kPrometheusExportTimeout);
        !allowed.ok()) {
      HttpResponse response = ErrorResponse(allowed);
      AddRetryAfter(allowed, response);
      return response;
    }
  }
  PrometheusExportInput input;
  input.ingest = options_.store->GetIngestStatistics();
  input.now = absl::Now();
  input.reads = options_.store->GetReadRoutingStatistics();
  input.database = options_.store->GetDatabaseServerState();
  input.statistics = options_.statistics;
  input.unary_methods = options_.unary_methods;
  input.legacy_calls = options_.legacy_statistics->Calls();
  input.trial_metrics = options_.trial_metrics_statistics;
  if (options_.authenticator != nullptr) {
    input.auth_refusals = options_.authenticator->refusals();
  }
  input.max_latest_series = options_.prometheus_max_series;
  // Agents quiet for longer than --stale-after are not exported as current
  // (nor counted against the cap); one more than the cap tells whether some
  // live series were left out.
  const int64_t live_since_us =
      options_.stale_after == absl::InfiniteDuration()
          ? INT64_MIN
          : absl::ToUnixMicros(absl::Now() - options_.stale_after);
  input.latest = options_.store->LatestValuesOfActiveTrials(
      options_.prometheus_max_series + 1, live_since_us,
      absl::Now() + kPrometheusExportTimeout);
  HttpResponse response;
  response.content_type = "text/plain; version=0.0.4; charset=utf-8";
  response.body = RenderPrometheusExport(input);
  return response;
}

HttpResponse HttpPaths::Handle(const HttpRequest& request) const {
  // A credential header is a singleton (RFC 9110): two would leave which
  // one counts to whoever reads them, so none is taken.
  for (absl::string_view name :
       {absl::string_view("authorization"), common::kAllocationTokenHeader}) {
    int given = 0;
    for (const auto& [key, value] : request.headers) {
      if (absl::EqualsIgnoreCase(key, name)) ++given;
    }
    if (given > 1) {
      return ErrorResponse(absl::InvalidArgumentError(absl::StrCat(
          "the ", name, " header is given ", given,
          " times; send one credential")));
    }
  }
  std::optional<HttpResponse> page;
  if (options_.web != nullptr) page = options_.web->Serve(request.path);
  const bool get_only = page.has_value() || request.path == "/metrics" ||
                        request.path == "/healthz" || request.path == "/livez";
  if (get_only && request.method != "GET" && request.method != "HEAD") {
    HttpResponse response = ErrorResponse(
        absl::UnimplementedError(absl::StrCat("method ", request.method,
                                              " is not allowed on ",
                                              request.path)),
        405);
    response.headers.emplace_back("Allow", "GET, HEAD");
    return response;
  }
  if (page.has_value()) return *std::move(page);
  if (request.path == "/metrics") return PrometheusExport(request);
  if (request.path == "/healthz") {
    HttpResponse response;
    // The database's own error goes to the log, not to strangers.
    const char* reason = options_.unready_reason();
    response.status = reason == nullptr ? 200 : 503;
    response.body = reason == nullptr
                        ? "{\"status\":\"SERVING\""
                        : absl::StrCat("{\"status\":\"NOT_SERVING\",\"reason\":\"",
                                       reason, "\"");
    // Commits refused for now (a full disk): still ready, as queries
    // answer and every server of the database would refuse the same; the
    // body says so for whoever looks.
    if (const storage::IngestStatistics ingest = options_.store->GetIngestStatistics();
        ingest.stalled_since.has_value()) {
      absl::StrAppend(
          &response.body, ",\"ingest\":\"STALLED\",\"ingestStalledSeconds\":",
          absl::ToInt64Seconds(absl::Now() - *ingest.stalled_since),
          ",\"ingestReason\":\"",
          ingest.stalled_on_full_disk ? "the database server's disk is full"
                                      : "the database refuses commits for now",
          "\"");
    }
    response.body += "}";
    return response;
  }
  if (request.path == "/v1/metrics") {  // OTLP/HTTP, POST only
    if (request.method != "POST") {
      HttpResponse response = OtlpErrorResponse(
          request.Header("content-type"),
          absl::UnimplementedError(absl::StrCat(
              "method ", request.method, " is not allowed on /v1/metrics")),
          405);
      response.headers.emplace_back("Allow", "POST");
      return response;
    }
    if (options_.guard != nullptr) {
      if (absl::Status allowed = options_.guard->CheckHttp(
              common::PresentedCredential(
                  request.Header("authorization"),
                  request.Header(common::kAllocationTokenHeader)),
              request.client_address, Access::kIngestPerResource,
              "POST /v1/metrics", absl::Now() + kOtlpAuthTimeout);
          !allowed.ok()) {
        return OtlpErrorResponse(
            request.Header("content-type"), allowed, 0,
            common::RetryAfterOf(allowed).value_or(absl::Seconds(1)));
      }
    }
    return options_.gateway->ExportOtlp(request);
  }
  if (request.path == "/livez") {  // answering is the proof
    HttpResponse response;
    response.body = "{\"status\":\"ALIVE\"}";
    return response;
  }
  return options_.gateway->Handle(request);
}

}  // namespace metrics::server
