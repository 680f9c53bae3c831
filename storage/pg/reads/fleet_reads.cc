#include "storage/pg/reads/fleet_reads.h"

#include <pqxx/result>
#include <pqxx/transaction>

#include <algorithm>
#include <tuple>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "storage/format/packed_report.h"
#include "storage/format/sealed_window.h"
#include "storage/pg/reads/raw_values.h"
#include "storage/pg/sql_arrays.h"
#include "storage/pg/sql_time.h"
#include "storage/rollup.h"

namespace metrics::storage::pg {

namespace {

// The span of an agent's newest samples that counts as its latest: the last
// point of each series in it.
constexpr int64_t kLatestSpanUs = 10'000'000;

// For each (trial_id, agent_id) row of `agents_sql`, in its order: the raw
// rows of the agent's newest 10 s bucket (the newest raw row's), one row
// each, or with no raw row its newest sealed window, or one row of NULLs.
// Columns: trial_id, agent_id, end_time (µs), id, packed_values,
// sealed_values. Each a backward probe of one of the indexes of system rows.
std::string NewestRowsSql(absl::string_view agents_sql) {
  const auto of_agent = [](absl::string_view form) {
    return absl::StrCat("FROM metrics_profiling m WHERE m.trial_id = a.trial_id AND ",
                        SystemRowsOfAgentSql("a.agent_id"), " AND ", form);
  };
  return absl::StrCat(
      "SELECT a.trial_id, a.agent_id, ", EpochMicrosSql("coalesce(r.end_time, s.end_time)"),
      ", coalesce(r.id, s.id), r.packed_values, s.sealed_values FROM (", agents_sql,
      ") a LEFT JOIN LATERAL (SELECT m.end_time AS newest ",
      of_agent("packed_values IS NOT NULL"),
      " ORDER BY m.end_time DESC LIMIT 1) n ON true "
      "LEFT JOIN LATERAL (SELECT m.end_time, m.id, m.packed_values ",
      of_agent("packed_values IS NOT NULL"),
      " AND m.end_time >= date_bin('10 seconds', n.newest, timestamptz 'epoch')) r "
      "ON n.newest IS NOT NULL "
      "LEFT JOIN LATERAL (SELECT m.end_time, m.id, m.sealed_values ",
      of_agent("packed_values IS NULL AND sealed_values IS NOT NULL"),
      // A window sealed in parts: the last part sealed holds its newest
      // reports (a part of late rows aside).
      " ORDER BY m.end_time DESC, m.id DESC LIMIT 1) s ON n.newest IS NULL");
}

// An agent's newest samples: the stats of each series over its newest
// 10 s bucket (no series when it has no raw row nor sealed window).
struct NewestOfAgent {
  int32_t trial_id = 0;
  std::string agent_id;
  AgentRollup stats;
};

// NewestRowsSql's rows, an entry per agent in their order.
absl::StatusOr<std::vector<NewestOfAgent>> DecodeNewest(const pqxx::result& rows) {
  std::vector<NewestOfAgent> agents;
  struct Report {
    int64_t time_us, id;
    std::vector<SeriesValue> values;
  };
  std::vector<Report> reports;
  const auto finish = [&] {
    if (agents.empty() || reports.empty()) return;
    std::sort(reports.begin(), reports.end(), [](const Report& a, const Report& b) {
      return std::tie(a.time_us, a.id) < std::tie(b.time_us, b.id);
    });
    const int64_t since = AlignDown(reports.back().time_us, kLatestSpanUs);
    for (const Report& r : reports) {
      if (r.time_us < since) continue;
      for (const auto& [series, value] : r.values) agents.back().stats[series].Add(r.time_us, value);
    }
    reports.clear();
  };
  for (const pqxx::row& row : rows) {
    const int32_t trial = row[0].as<int32_t>();
    if (agents.empty() || agents.back().trial_id != trial ||
        agents.back().agent_id != row[1].c_str()) {
      finish();
      agents.push_back({trial, row[1].as<std::string>(), {}});
    }
    if (!row[4].is_null()) {
      absl::StatusOr<std::vector<SeriesValue>> values =
          UnpackReport(DecodeByteaHex(row[4].c_str()));
      if (!values.ok()) return values.status();
      reports.push_back({row[2].as<int64_t>(), row[3].as<int64_t>(), *std::move(values)});
    } else if (!row[5].is_null()) {
      absl::StatusOr<std::vector<WindowReport>> window =
          UnsealWindow(DecodeByteaHex(row[5].c_str()));
      if (!window.ok()) return window.status();
      for (size_t k = 0; k < window->size(); ++k) {
        WindowReport& w = (*window)[k];
        reports.push_back({w.time_us, static_cast<int64_t>(k), std::move(w.values)});
      }
    }
  }
  finish();
  return agents;
}

}  // namespace

absl::StatusOr<LatestValues> PgFleetReads::LatestValuesOfActiveTrials(
    size_t limit, int64_t live_since_us, absl::Time deadline) {
  return Run<LatestValues>(
      "reading the latest values of active trials", deadline,
      [&](pqxx::transaction_base& tx) -> absl::StatusOr<LatestValues> {
        // Agents are read a page at a time in the answer's order (newest
        // trial first, then agent id byte by byte, as std::string sorts),
        // and series names only for the agents taken, so a scrape's memory
        // follows `limit`, not the fleet: reading every series of every
        // active trial cost 26-66 MB a scrape at 5000 agents.
        constexpr int kAgentsPerPage = 500;
        LatestValues answer;
        std::vector<LatestValue>& values = answer.values;
        int64_t after_trial = int64_t{1} << 31;  // above every trial id
        std::string after_agent;
        while (values.size() < limit) {
          // Each agent's newest 10 s holds the last point of every series
          // it reported in those seconds; a series missing from it has gone
          // quiet and is not "latest". An agent with no samples yet still
          // counts in the page, so a short page is the last.
          ASSIGN_OR_RETURN(
              const std::vector<NewestOfAgent> agents,
              DecodeNewest(tx.exec_params(
                  absl::StrCat(
                      NewestRowsSql(
                          "SELECT s.trial_id, s.agent_id FROM trials t JOIN "
                          "series s ON s.trial_id = t.id AND s.metric_group = $1 "
                          "WHERE t.state = 'ACTIVE' AND (s.trial_id < $2::bigint "
                          "OR (s.trial_id = $2::bigint AND "
                          "s.agent_id COLLATE \"C\" > $3)) "
                          "GROUP BY s.trial_id, s.agent_id "
                          "ORDER BY s.trial_id DESC, s.agent_id COLLATE \"C\" "
                          "LIMIT $4"),
                      " ORDER BY a.trial_id DESC, a.agent_id COLLATE \"C\""),
                  std::string(kSystemGroup), after_trial, after_agent, kAgentsPerPage)));
          // The page's values, named once their series are read below.
          std::vector<int64_t> trial_ids, series_ids;
          const size_t first = values.size();
          for (const NewestOfAgent& agent : agents) {
            if (agent.stats.empty()) continue;
            const int32_t trial_id = agent.trial_id;
            const AgentRollup* rollup = &agent.stats;
            int64_t newest_us = INT64_MIN;
            for (const auto& [id, stats] : *rollup) {
              newest_us = std::max(newest_us, stats.last_time_us);
            }
            if (newest_us < live_since_us) {
              if (answer.stale_agents.size() < limit) {
                answer.stale_agents.push_back({trial_id, agent.agent_id, newest_us});
              }
              answer.stale_series += static_cast<int64_t>(rollup->size());
              continue;
            }
            for (const auto& [id, stats] : *rollup) {
              trial_ids.push_back(trial_id);
              series_ids.push_back(id);
              values.push_back({trial_id, agent.agent_id, "", "", "", stats.last_value,
                                stats.last_time_us});
            }
          }
          absl::flat_hash_map<std::pair<int32_t, int64_t>, SeriesInfo> series;
          if (!series_ids.empty()) {
            for (const auto& row : tx.exec_params(
                     absl::StrCat("SELECT s.trial_id, ", kSeriesColumnsSql,
                                  " FROM unnest($1::int[], $2::bigint[]) "
                                  "k(trial_id, series_id) JOIN series s USING "
                                  "(trial_id, series_id) WHERE "
                                  "s.metric_group = $3"),
                     IntArray(trial_ids), IntArray(series_ids),
                     std::string(kSystemGroup))) {
              SeriesInfo info = SeriesFromRow(row, 1);
              series.emplace(std::pair(row[0].as<int32_t>(), info.series_id),
                             std::move(info));
            }
          }
          // Keeps the page's values whose series the registry has, named.
          size_t kept = first;
          for (size_t i = first; i < values.size(); ++i) {
            const auto it = series.find(
                std::pair(values[i].trial_id, series_ids[i - first]));
            if (it == series.end()) continue;
            LatestValue& v = values[kept++];
            if (kept - 1 != i) v = std::move(values[i]);
            v.gpu_uuid = it->second.gpu_uuid;
            v.name = it->second.name;
            v.unit = it->second.unit;
          }
          values.resize(kept);
          if (agents.size() < static_cast<size_t>(kAgentsPerPage)) break;
          after_trial = agents.back().trial_id;
          after_agent = agents.back().agent_id;
        }
        std::sort(values.begin(), values.end(),
                  [](const LatestValue& a, const LatestValue& b) {
                    return std::tie(b.trial_id, a.agent_id, a.name, a.gpu_uuid) <
                           std::tie(a.trial_id, b.agent_id, b.name, b.gpu_uuid);
                  });
        if (values.size() > limit) values.resize(limit);
        return answer;
      });
}

absl::StatusOr<std::vector<AgentActivity>> PgFleetReads::AgentActivityOfTrials(
    const std::vector<int32_t>& trial_ids, absl::Time deadline) {
  if (trial_ids.empty()) return std::vector<AgentActivity>{};
  return Run<std::vector<AgentActivity>>(
      "reading when the agents of trials last reported", deadline,
      [&](pqxx::transaction_base& tx)
          -> absl::StatusOr<std::vector<AgentActivity>> {
        // An agent's newest 10 s holds its newest sample.
        ASSIGN_OR_RETURN(
            std::vector<NewestOfAgent> newest,
            DecodeNewest(tx.exec_params(
                absl::StrCat(NewestRowsSql("SELECT DISTINCT trial_id, agent_id FROM "
                                           "series WHERE trial_id = ANY($1::int[]) AND "
                                           "metric_group = $2"),
                             " ORDER BY a.trial_id, a.agent_id"),
                IntArray({trial_ids.begin(), trial_ids.end()}), std::string(kSystemGroup))));
        std::vector<AgentActivity> agents;
        for (NewestOfAgent& agent : newest) {
          AgentActivity activity{agent.trial_id, std::move(agent.agent_id), INT64_MIN};
          for (const auto& [id, stats] : agent.stats) {
            activity.last_sample_us = std::max(activity.last_sample_us, stats.last_time_us);
          }
          if (!agent.stats.empty()) agents.push_back(std::move(activity));
        }
        return agents;
      });
}

}  // namespace metrics::storage::pg
