#include "storage/pg/reads/fleet_reads.h"

#include <pqxx/result>
#include <pqxx/transaction>

#include <algorithm>
#include <tuple>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "storage/format/rollup_codec.h"
#include "storage/pg/rollup_sql.h"
#include "storage/pg/sql_arrays.h"
#include "storage/rollup.h"

namespace metrics::storage::pg {

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
          // Each agent's newest finest bucket holds the last point of every
          // series it reported in those seconds; a series missing from it
          // has gone quiet and is not "latest". An agent with no bucket
          // yet still counts in the page, so a short page is the last.
          const pqxx::result agents = tx.exec_params(
              absl::StrCat(
                  NewestRollupRowsSql(
                      "SELECT s.trial_id, s.agent_id FROM trials t JOIN "
                      "series s ON s.trial_id = t.id AND s.metric_group = $1 "
                      "WHERE t.state = 'ACTIVE' AND (s.trial_id < $3::bigint "
                      "OR (s.trial_id = $3::bigint AND "
                      "s.agent_id COLLATE \"C\" > $4)) "
                      "GROUP BY s.trial_id, s.agent_id "
                      "ORDER BY s.trial_id DESC, s.agent_id COLLATE \"C\" "
                      "LIMIT $5",
                      "$2", /*keep_agents_without_row=*/true),
                  " ORDER BY a.trial_id DESC, a.agent_id COLLATE \"C\""),
              std::string(kSystemGroup), kRollupWidthsSeconds[0], after_trial,
              after_agent, kAgentsPerPage);
          // The page's values, named once their series are read below.
          std::vector<int64_t> trial_ids, series_ids;
          const size_t first = values.size();
          for (const auto& row : agents) {
            if (row[2].is_null()) continue;
            const int32_t trial_id = row[0].as<int32_t>();
            absl::StatusOr<AgentRollup> rollup =
                DecodeAgentRollup(DecodeByteaHex(row[2].as<std::string>()),
                                  row[3].as<int64_t>());
            if (!rollup.ok()) return rollup.status();
            int64_t newest_us = INT64_MIN;
            for (const auto& [id, stats] : *rollup) {
              newest_us = std::max(newest_us, stats.last_time_us);
            }
            if (newest_us < live_since_us) {
              if (answer.stale_agents.size() < limit) {
                answer.stale_agents.push_back(
                    {trial_id, row[1].as<std::string>(), newest_us});
              }
              answer.stale_series += static_cast<int64_t>(rollup->size());
              continue;
            }
            for (const auto& [id, stats] : *rollup) {
              trial_ids.push_back(trial_id);
              series_ids.push_back(id);
              values.push_back({trial_id, row[1].as<std::string>(), "", "",
                                "", stats.last_value, stats.last_time_us});
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
          after_trial = agents.back()[0].as<int64_t>();
          after_agent = agents.back()[1].as<std::string>();
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
        // An agent's newest finest bucket holds its newest sample.
        std::vector<AgentActivity> agents;
        for (const auto& row : tx.exec_params(
                 absl::StrCat(NewestRollupRowsSql(
                                  "SELECT DISTINCT trial_id, agent_id FROM "
                                  "series WHERE trial_id = ANY($1::int[]) AND "
                                  "metric_group = $2",
                                  "$3"),
                              " ORDER BY a.trial_id, a.agent_id"),
                 IntArray({trial_ids.begin(), trial_ids.end()}),
                 std::string(kSystemGroup), kRollupWidthsSeconds[0])) {
          absl::StatusOr<AgentRollup> rollup =
              DecodeAgentRollup(DecodeByteaHex(row[2].as<std::string>()),
                                row[3].as<int64_t>());
          if (!rollup.ok()) return rollup.status();
          AgentActivity activity{row[0].as<int32_t>(),
                                 row[1].as<std::string>(), INT64_MIN};
          for (const auto& [id, stats] : *rollup) {
            activity.last_sample_us =
                std::max(activity.last_sample_us, stats.last_time_us);
          }
          if (!rollup->empty()) agents.push_back(std::move(activity));
        }
        return agents;
      });
}

}  // namespace metrics::storage::pg
