// GET /metrics: the service's own statistics and the latest system metrics of
// active trials, in the Prometheus text format.
//
// Names: the service's statistics are metricsd_*; a trial's series are
// profiler_<name> with a unit suffix (percent becomes _ratio, divided by
// 100; bytes _bytes; bytes/s _bytes_per_second; other units none), labelled
// trial_id, agent_id and gpu_uuid. An agent that has sent nothing for
// longer than --stale-after is left out (the store passes it over): its
// last values are not current, and they do not count against the cap.
// metricsd_agent_last_sample_timestamp_seconds says when each agent of an
// active trial last reported, stale or not (alert on time() minus it).
//
// Thread-safety: thread-safe (pure function of its inputs).
#ifndef METRICS_SERVER_PROMETHEUS_PROMETHEUS_EXPORTER_H_
#define METRICS_SERVER_PROMETHEUS_PROMETHEUS_EXPORTER_H_

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "server/auth/authenticator.h"
#include "server/platform/trial_metrics_statistics.h"
#include "server/services/service_statistics.h"
#include "server/services/unary_call.h"
#include "storage/metric_store.h"

namespace metrics::server {

struct PrometheusExportInput {
  storage::IngestStatistics ingest;
  storage::ReadRoutingStatistics reads;  // exported with a standby only
  storage::DatabaseServerState database;  // of the last readiness check
  const ServiceStatistics* statistics = nullptr;
  std::vector<const UnaryMethod*> unary_methods;  // their latencies
  std::map<std::string, int64_t> legacy_calls;
  const TrialMetricsStatistics* trial_metrics = nullptr;  // none: not exported
  // Authentication's refusals; none (auth off): not exported.
  std::optional<AuthRefusals> auth_refusals;
  // The latest values of live agents, or why they could not be read.
  absl::StatusOr<storage::LatestValues> latest;
  // The cap on exported trial series; `latest` may hold one more, which
  // means some were left out.
  size_t max_latest_series = 0;
  absl::Time now;  // of the scrape, for ages
};

std::string RenderPrometheusExport(const PrometheusExportInput& input);

// The Prometheus name and scale of a trial series (exposed for tests and
// the Grafana dashboard's check).
struct PrometheusSeriesName {
  std::string name;
  double scale = 1;
};
PrometheusSeriesName TrialSeriesName(absl::string_view name,
                                     absl::string_view unit);

}  // namespace metrics::server

#endif  // METRICS_SERVER_PROMETHEUS_PROMETHEUS_EXPORTER_H_
