#include "server/prometheus/prometheus_exporter.h"

#include <algorithm>
#include <set>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "server/prometheus/prometheus_text.h"

namespace metrics::server {

PrometheusSeriesName TrialSeriesName(absl::string_view name,
                                     absl::string_view unit) {
  const std::string base = absl::StrCat("profiler_", PrometheusName(name));
  if (unit == "percent") return {absl::StrCat(base, "_ratio"), 0.01};
  if (unit == "bytes") return {absl::StrCat(base, "_bytes"), 1};
  if (unit == "bytes/s") return {absl::StrCat(base, "_bytes_per_second"), 1};
  if (unit == "watts") return {absl::StrCat(base, "_watts"), 1};
  if (unit == "celsius") return {absl::StrCat(base, "_celsius"), 1};
  if (unit == "hertz") return {absl::StrCat(base, "_hertz"), 1};
  return {base, 1};
}

namespace {

void WriteServiceStatistics(const PrometheusExportInput& in, PrometheusText& out) {
  const storage::IngestStatistics& s = in.ingest;
  out.Family("metricsd_ingested_samples_total", "counter",
             "Values stored by ingest since the server started.");
  out.Sample("metricsd_ingested_samples_total", {}, double(s.stored_values));
  out.Family("metricsd_ingested_batches_total", "counter",
             "Batches by outcome: stored, duplicate (already stored), "
             "rejected (bad content), failed (not committed; to be resent).");
  out.Sample("metricsd_ingested_batches_total", {{"outcome", "stored"}},
             double(s.stored_batches));
  out.Sample("metricsd_ingested_batches_total", {{"outcome", "duplicate"}},
             double(s.duplicate_batches));
  out.Sample("metricsd_ingested_batches_total", {{"outcome", "rejected"}},
             double(s.rejected_batches));
  out.Sample("metricsd_ingested_batches_total", {{"outcome", "failed"}},
             double(s.failed_batches));
  out.Family("metricsd_batch_commit_seconds", "histogram",
             "From a batch's arrival to the end of its transaction.");
  out.Histogram("metricsd_batch_commit_seconds", {}, s.commit_seconds);
  out.Family("metricsd_ingest_queue_values", "gauge",
             "Values waiting for the database writer.");
  out.Sample("metricsd_ingest_queue_values", {}, double(s.queued_values));
  out.Family("metricsd_ingest_stalled_seconds", "gauge",
             "How long the database has refused commits for now (down, out "
             "of space, ...) while they are retried; 0 while it commits.");
  out.Sample("metricsd_ingest_stalled_seconds", {},
             s.stalled_since.has_value()
                 ? std::max(0.0, absl::ToDoubleSeconds(in.now - *s.stalled_since))
                 : 0.0);
  out.Family("metricsd_database_disk_full", "gauge",
             "1 while commits are refused because the database server's disk "
             "is full.");
  out.Sample("metricsd_database_disk_full", {},
             s.stalled_since.has_value() && s.stalled_on_full_disk ? 1 : 0);

  out.Family("metricsd_open_streams", "gauge", "Streaming calls open now.");
  out.Sample("metricsd_open_streams", {{"rpc", "StreamSystemMetrics"}},
             double(in.statistics->ingest_streams()));
  out.Sample("metricsd_open_streams", {{"rpc", "FollowSeries"}},
             double(in.statistics->follow_streams()));
  out.Family("metricsd_call_seconds", "histogram",
             "Time from a unary call's start to its answer, refusals "
             "included, over gRPC and REST alike, by RPC.");
  for (const UnaryMethod* method : in.unary_methods) {
    // "/metrics.v1.QueryService/QuerySeries" -> "QuerySeries"
    const std::string& name = method->name;
    out.Histogram("metricsd_call_seconds", {{"rpc", name.substr(name.rfind('/') + 1)}},
                  method->latency->Snapshot());
  }

  out.Family("metricsd_database_primary", "gauge",
             "1 when the last readiness check (each second) reached a primary "
             "through --database-url, 0 when it reached a standby or nothing.");
  out.Sample("metricsd_database_primary", {},
             in.database.reached && in.database.primary ? 1 : 0);
  if (in.database.sync_standbys.has_value()) {
    out.Family("metricsd_database_sync_standbys", "gauge",
               "Standbys the primary counts as synchronous now: a commit, and "
               "so an acknowledgement, waits for them.");
    out.Sample("metricsd_database_sync_standbys", {},
               double(*in.database.sync_standbys));
  }
  if (in.database.standby_lag_seconds.has_value()) {
    out.Family("metricsd_database_standby_lag_seconds", "gauge",
               "The largest replay lag of the primary's standbys "
               "(pg_stat_replication; 0 without standbys).");
    out.Sample("metricsd_database_standby_lag_seconds", {},
               *in.database.standby_lag_seconds);
  }

  if (const storage::ReadRoutingStatistics& r = in.reads; r.standby) {
    out.Family("metricsd_standby_reads_total", "counter",
               "Reads (charts, series, trial lists) sent to the standby of "
               "--read-database-url.");
    out.Sample("metricsd_standby_reads_total", {}, double(r.standby_reads));
    out.Family("metricsd_standby_fallbacks_total", "counter",
               "Reads the primary answered instead of the standby, by reason: "
               "unreachable, lagging (more than --max-read-lag), not_standby "
               "(not in recovery), retried (failed on the standby).");
    for (const auto& [reason, n] :
         {std::pair("unreachable", r.fallback_unreachable),
          std::pair("lagging", r.fallback_lagging),
          std::pair("not_standby", r.fallback_not_standby),
          std::pair("retried", r.fallback_retried)}) {
      out.Sample("metricsd_standby_fallbacks_total", {{"reason", reason}},
                 double(n));
    }
    if (r.lag_seconds.has_value()) {
      out.Family("metricsd_standby_lag_seconds", "gauge",
                 "How far the standby was behind the primary at the last "
                 "check (absent while the primary does not answer).");
      out.Sample("metricsd_standby_lag_seconds", {}, *r.lag_seconds);
    }
  }

  out.Family("metricsd_legacy_calls_total", "counter",
             "Calls of the deprecated profiler API, by method.");
  for (const auto& [method, calls] : in.legacy_calls) {
    out.Sample("metricsd_legacy_calls_total", {{"method", method}},
               double(calls));
  }

  if (const TrialMetricsStatistics* t = in.trial_metrics; t != nullptr) {
    using S = TrialMetricsStatistics;
    out.Family("metricsd_trial_metrics_reports_total", "counter",
               "Reports of the platform's ReportTrialMetrics, by kind (profiling: "
               "system samples; generic: the platform's metric rows) and outcome "
               "(stored, duplicate: a copy of a stored report, refused, failed: "
               "to be retried).");
    for (S::Kind kind : S::kKinds) {
      for (S::Outcome outcome : S::kOutcomes) {
        out.Sample("metricsd_trial_metrics_reports_total",
                   {{"kind", std::string(S::Name(kind))},
                    {"outcome", std::string(S::Name(outcome))}},
                   double(t->Reports(kind, outcome)));
      }
    }
    out.Family("metricsd_trial_metrics_dropped_values_total", "counter",
               "Values of the profiling groups of ReportTrialMetrics dropped as NaN "
               "or infinite.");
    out.Sample("metricsd_trial_metrics_dropped_values_total", {},
               double(t->dropped_values()));
  }

  if (const std::optional<AuthRefusals>& a = in.auth_refusals; a.has_value()) {
    out.Family("metricsd_auth_refusals_total", "counter",
               "Calls refused before their work, by reason (unauthenticated: no "
               "usable token; limited: from an address past its failed "
               "authentications, refused 429 / RESOURCE_EXHAUSTED before any "
               "token look-up).");
    out.Sample("metricsd_auth_refusals_total", {{"reason", "unauthenticated"}},
               double(a->unauthenticated));
    out.Sample("metricsd_auth_refusals_total", {{"reason", "limited"}},
               double(a->limited));
  }
}

// When each agent of the latest values last reported, by (trial, agent):
// the live agents' newest values and the stale agents' last samples.
std::map<std::pair<int32_t, std::string>, int64_t> LastSampleOfAgents(
    const storage::LatestValues& latest, size_t live_values) {
  std::map<std::pair<int32_t, std::string>, int64_t> last;
  for (size_t i = 0; i < live_values; ++i) {
    const storage::LatestValue& v = latest.values[i];
    auto [it, added] = last.emplace(std::pair(v.trial_id, v.agent_id), v.time_us);
    if (!added) it->second = std::max(it->second, v.time_us);
  }
  for (const storage::AgentActivity& a : latest.stale_agents) {
    last.emplace(std::pair(a.trial_id, a.agent_id), a.last_sample_us);
  }
  return last;
}

void WriteLatest(const PrometheusExportInput& in, PrometheusText& out) {
  out.Family("metricsd_latest_values_up", "gauge",
             "1 when the latest values of active trials could be read.");
  out.Sample("metricsd_latest_values_up", {}, in.latest.ok() ? 1 : 0);
  if (!in.latest.ok()) return;
  const std::vector<storage::LatestValue>& live = in.latest->values;
  const size_t exported = std::min(live.size(), in.max_latest_series);
  out.Family("metricsd_agent_last_sample_timestamp_seconds", "gauge",
             "When each agent of an active trial last sent a sample.");
  for (const auto& [agent, time_us] : LastSampleOfAgents(*in.latest, exported)) {
    out.Sample("metricsd_agent_last_sample_timestamp_seconds",
               {{"trial_id", absl::StrCat(agent.first)},
                {"agent_id", agent.second}},
               double(time_us) / 1e6);
  }

  // A family's samples must be together: sort by exported name.
  struct Row {
    PrometheusSeriesName metric;
    const storage::LatestValue* value;
  };
  std::vector<Row> rows;
  for (size_t i = 0; i < exported; ++i) {
    rows.push_back({TrialSeriesName(live[i].name, live[i].unit), &live[i]});
  }
  out.Family("metricsd_latest_series", "gauge",
             "Series of active trials exported below.");
  out.Sample("metricsd_latest_series", {}, double(rows.size()));
  out.Family("metricsd_latest_series_stale", "gauge",
             "Series of active trials left out because their agent has sent "
             "nothing for longer than --stale-after.");
  out.Sample("metricsd_latest_series_stale", {},
             double(in.latest->stale_series));
  out.Family("metricsd_latest_series_truncated", "gauge",
             "1 when active trials have more live series than the cap "
             "(--prometheus-max-series) and some were left out.");
  out.Sample("metricsd_latest_series_truncated", {},
             live.size() > in.max_latest_series ? 1 : 0);

  std::stable_sort(rows.begin(), rows.end(), [](const Row& a, const Row& b) {
    return a.metric.name < b.metric.name;
  });
  // Two names can map to one metric ("a.b", "a_b"): keep one sample per
  // label set, as the format requires.
  std::set<std::tuple<std::string, int32_t, std::string, std::string>> seen;
  const std::string* family = nullptr;
  for (const Row& row : rows) {
    const storage::LatestValue& v = *row.value;
    if (!seen.emplace(row.metric.name, v.trial_id, v.agent_id, v.gpu_uuid)
             .second) {
      continue;
    }
    if (family == nullptr || *family != row.metric.name) {
      out.Family(row.metric.name, "gauge",
                 absl::StrCat("Latest ", v.name, " (", v.unit,
                              ") of active trials."));
      family = &row.metric.name;
    }
    const std::string trial = absl::StrCat(v.trial_id);
    out.Sample(row.metric.name,
               {{"trial_id", trial}, {"agent_id", v.agent_id},
                {"gpu_uuid", v.gpu_uuid}},
               v.value * row.metric.scale);
  }
}

}  // namespace

std::string RenderPrometheusExport(const PrometheusExportInput& input) {
  PrometheusText out;
  WriteServiceStatistics(input, out);
  WriteLatest(input, out);
  return out.Take();
}

}  // namespace metrics::server
