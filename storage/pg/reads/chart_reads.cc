#include "storage/pg/reads/chart_reads.h"

#include <pqxx/result>
#include <pqxx/transaction>

#include <algorithm>
#include <iterator>
#include <map>
#include <memory>
#include <optional>
#include <queue>
#include <utility>

#include "absl/container/btree_map.h"
#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "storage/pg/reads/agent_reports.h"
#include "storage/pg/reads/pending_rollups.h"
#include "storage/pg/reads/raw_values.h"
#include "storage/pg/reads/rollup_rows.h"
#include "storage/pg/rollup_sql.h"
#include "storage/pg/sql_arrays.h"
#include "storage/pg/sql_time.h"
#include "storage/pg/trial_rows.h"
#include "storage/rollup.h"

namespace metrics::storage::pg {

namespace {

constexpr int kCoarsestWidthSeconds =
    kRollupWidthsSeconds[std::size(kRollupWidthsSeconds) - 1];

// The chart reads' frequent statements, prepared on each pool connection.
struct ChartStatements {
  // NULL parameters mean "no condition", so one statement serves every
  // filter; the primary key walks ids downwards.
  PreparedStatement list_trials{
      "list_trials",
      absl::StrCat("SELECT ", TrialColumnsSql(),
                   " FROM trials WHERE ($1::text IS NULL OR state = $1) "
                   "AND ($2::int IS NULL OR id < $2) "
                   "ORDER BY id DESC LIMIT $3")};
  // Relies on the unique key (trial_id, metric_group, agent_id, ...).
  PreparedStatement series_of_group{
      "series_of_group",
      absl::StrCat("SELECT ", kSeriesColumnsSql,
                   " FROM series WHERE trial_id = $1 AND metric_group = $2 "
                   "ORDER BY agent_id, name, gpu_uuid")};
  // Every bucket of the coarsest width of the agents ($2) of a trial
  // ($1): their counts add up to each series' total, and their first and
  // last times bound it.
  PreparedStatement coarsest_rollups{
      "coarsest_rollups",
      RollupRowsSql("$1::int", "$2::text[]", kCoarsestWidthSeconds,
                    std::nullopt)};

  PreparedStatement raw_horizon{
      "raw_horizon",
      absl::StrCat("SELECT ", EpochMicrosSql("horizon"), " FROM raw_retention")};

  std::vector<PreparedStatement> All() const {
    return {TrialExistsStatement(), list_trials, series_of_group,
            coarsest_rollups,       raw_horizon, AgentReportScan::Statement(),
            PendingRollups::Statement()};
  }
};

const ChartStatements& ChartSql() {
  static const auto* statements = new ChartStatements();
  return *statements;
}

// OUT_OF_RANGE when raw samples from `from_us` on may have expired: the
// window starts before the raw data horizon that raw retention recorded.
absl::Status CheckRawHorizon(pqxx::transaction_base& tx, int64_t from_us) {
  if (const pqxx::result horizon = tx.exec_prepared(ChartSql().raw_horizon.name);
      !horizon.empty() && from_us < horizon[0][0].as<int64_t>()) {
    return RawExpiredError(horizon[0][0].as<int64_t>());
  }
  return absl::OkStatus();
}

// Sets each GPU series' gpu_index: its GPU's rank among the agent's GPUs
// by the first series id registered for it, which is the order the agent
// first reported them.
void NumberGpus(std::vector<SeriesInfo>& series) {
  absl::flat_hash_map<std::string, std::map<int64_t, std::string>> firsts;
  absl::flat_hash_map<std::pair<std::string, std::string>, int64_t> first_id;
  for (const SeriesInfo& info : series) {
    if (info.gpu_uuid.empty()) continue;
    auto [it, added] = first_id.emplace(std::pair(info.agent_id, info.gpu_uuid),
                                        info.series_id);
    if (!added) it->second = std::min(it->second, info.series_id);
  }
  for (const auto& [key, id] : first_id) firsts[key.first][id] = key.second;
  absl::flat_hash_map<std::pair<std::string, std::string>, int> index;
  for (const auto& [agent, by_id] : firsts) {
    int next = 0;
    for (const auto& [id, gpu] : by_id) index[std::pair(agent, gpu)] = next++;
  }
  for (SeriesInfo& info : series) {
    if (!info.gpu_uuid.empty()) {
      info.gpu_index = index[std::pair(info.agent_id, info.gpu_uuid)];
    }
  }
}

// The scan's list of the series at `indexes` of `series` (one agent's).
std::vector<RawValueColumns::Series> WantedOf(const std::vector<SeriesInfo>& series,
                                             const std::vector<size_t>& indexes) {
  std::vector<RawValueColumns::Series> wanted;
  for (size_t i : indexes) {
    wanted.push_back({series[i].series_id, series[i].name, series[i].gpu_uuid});
  }
  return wanted;
}

}  // namespace

std::vector<PreparedStatement> PgChartReads::Statements() { return ChartSql().All(); }

absl::StatusOr<std::vector<Trial>> PgChartReads::ListTrials(
    const TrialListFilter& filter, absl::Time deadline) {
  if (filter.limit < 1 || filter.limit > kMaxTrialListLimit) {
    return absl::InvalidArgumentError(
        absl::StrCat("limit: ", filter.limit, " is outside 1..",
                     kMaxTrialListLimit));
  }
  std::optional<std::string> state;
  if (filter.state.has_value()) state = std::string(TrialStateName(*filter.state));
  return Run<std::vector<Trial>>(
      "listing trials", deadline,
      [&](pqxx::transaction_base& tx) -> absl::StatusOr<std::vector<Trial>> {
        pqxx::result r = tx.exec_prepared(ChartSql().list_trials.name, state,
                                          filter.before_id, filter.limit);
        std::vector<Trial> trials;
        trials.reserve(r.size());
        for (const pqxx::row& row : r) trials.push_back(TrialFromRow(row));
        return trials;
      });
}

absl::StatusOr<std::vector<SeriesInfo>> PgChartReads::ListSeries(
    int32_t trial_id, bool extents, absl::Time deadline) {
  // One snapshot for the stored buckets and the raw rows not in them.
  return RunSnapshot<std::vector<SeriesInfo>>(
      absl::StrCat("listing the series of trial ", trial_id), deadline,
      [&](pqxx::transaction_base& tx) -> absl::StatusOr<std::vector<SeriesInfo>> {
        RETURN_IF_ERROR(CheckTrialExists(tx, trial_id));
        std::vector<SeriesInfo> series;
        absl::flat_hash_map<int64_t, size_t> by_id;
        for (const auto& row : tx.exec_prepared(ChartSql().series_of_group.name,
                                                trial_id,
                                                std::string(kSystemGroup))) {
          SeriesInfo info = SeriesFromRow(row);
          by_id[info.series_id] = series.size();
          series.push_back(std::move(info));
        }
        NumberGpus(series);
        if (!extents || series.empty()) return series;
        // The coarsest buckets and the raw rows not in them yet hold every
        // sample once: their counts add up to the total, and their first and
        // last times bound the series.
        // Naming the agents makes this a range scan of the primary key per
        // agent; without them it would scan every width's rows of the trial.
        std::vector<std::string> agents;
        for (const SeriesInfo& info : series) {
          if (agents.empty() || agents.back() != info.agent_id) {
            agents.push_back(info.agent_id);  // series are ordered by agent
          }
        }
        const RollupRowDecoder decoder(kCoarsestWidthSeconds, std::nullopt,
                                       std::nullopt);
        const auto add = [&](const RollupRow& bucket) {
          for (const auto& [id, stats] : bucket.stats) {
            auto it = by_id.find(id);
            if (it == by_id.end()) continue;
            SeriesInfo& info = series[it->second];
            info.sample_count += stats.count;
            if (!info.first_time_us || stats.first_time_us < *info.first_time_us) {
              info.first_time_us = stats.first_time_us;
            }
            if (!info.last_time_us || stats.last_time_us > *info.last_time_us) {
              info.last_time_us = stats.last_time_us;
            }
          }
        };
        RollupRow bucket;
        for (const auto& row : tx.exec_prepared(ChartSql().coarsest_rollups.name,
                                                trial_id, TextArray(agents))) {
          ASSIGN_OR_RETURN(const bool kept, decoder.Decode(row, bucket));
          if (kept) add(bucket);
        }
        ASSIGN_OR_RETURN(PendingRollups pending,
                         PendingRollups::Read(tx, trial_id, agents, kCoarsestWidthSeconds,
                                              std::nullopt, std::nullopt));
        pending.TakeRest(add);
        return series;
      });
}

absl::Status PgChartReads::ReadRollups(
    int32_t trial_id, const std::vector<std::string>& agents,
    int width_s, const std::vector<int64_t>& series_ids, int64_t from_us,
    int64_t to_us, absl::Time deadline, RollupSink& sink) {
  std::vector<int64_t> wanted = series_ids;
  std::sort(wanted.begin(), wanted.end());
  const BucketWindow window{from_us, to_us};
  const RollupRowDecoder decoder(width_s, window, wanted);
  // Rows a fetch brings at most: a window of thousands of buckets is read
  // through a cursor, so the client holds one page of (hex) rows at a time.
  constexpr int kRowsPerFetch = 500;
  // The value is unused: the rows went to the sink.
  // One snapshot for the stored buckets and the raw rows not in them: a seal
  // moves samples from one to the other.
  const absl::StatusOr<bool> read = RunSnapshot<bool>(
      absl::StrCat("reading rollups of trial ", trial_id), deadline,
      [&](pqxx::transaction_base& tx) -> absl::StatusOr<bool> {
        sink.Restart();
        ASSIGN_OR_RETURN(PendingRollups pending,
                         PendingRollups::Read(tx, trial_id, agents, width_s, window, wanted));
        PendingMerger merged(sink, std::move(pending));
        // DECLARE takes no parameters: the numbers are written out, the
        // agents quoted.
        tx.exec(absl::StrCat(
            "DECLARE rollup_rows NO SCROLL CURSOR FOR ",
            RollupRowsSql(absl::StrCat(trial_id),
                          absl::StrCat(tx.quote(TextArray(agents)), "::text[]"),
                          width_s, window)));
        const std::string fetch =
            absl::StrCat("FETCH ", kRowsPerFetch, " FROM rollup_rows");
        RollupRow r;
        for (;;) {
          const pqxx::result rows = tx.exec(fetch);
          for (const auto& row : rows) {
            ASSIGN_OR_RETURN(const bool kept, decoder.Decode(row, r));
            if (kept) merged.Take(r);
          }
          if (rows.size() < kRowsPerFetch) {
            merged.Finish();
            return true;
          }
        }
      });
  return read.status();
}

absl::StatusOr<std::vector<std::vector<Sample>>>
PgChartReads::ReadRawSamples(int32_t trial_id,
                                  const std::vector<SeriesInfo>& series,
                                  int64_t from_us, int64_t to_us,
                                  int64_t max_reports, absl::Time deadline) {
  // One snapshot for the horizon and the rows: retention records its horizon
  // before it removes a row, so rows after a horizon this snapshot has not
  // seen are all still here.
  return RunSnapshot<std::vector<std::vector<Sample>>>(
      absl::StrCat("reading raw samples of trial ", trial_id), deadline,
      [&](pqxx::transaction_base& tx)
          -> absl::StatusOr<std::vector<std::vector<Sample>>> {
        std::vector<std::vector<Sample>> result(series.size());
        RETURN_IF_ERROR(CheckRawHorizon(tx, from_us));
        // One scan per agent, decoding every wanted series of it.
        absl::btree_map<std::string, std::vector<size_t>> by_agent;
        for (size_t i = 0; i < series.size(); ++i) {
          by_agent[series[i].agent_id].push_back(i);
        }
        for (const auto& [agent, indexes] : by_agent) {
          AgentReportScan scan(tx, trial_id, agent, WantedOf(series, indexes), from_us, to_us,
                               /*prepared=*/true);
          std::vector<StoredReport> page;
          int64_t reports = 0;
          while (true) {
            ASSIGN_OR_RETURN(const bool more, scan.Next(page));
            if (!more) break;
            reports += static_cast<int64_t>(page.size());
            if (reports > max_reports) {
              return absl::ResourceExhaustedError(absl::StrCat(
                  "agent ", agent, " has more than ", max_reports, " reports in the window"));
            }
            for (const StoredReport& r : page) {
              for (const auto& [c, value] : r.values) {
                result[indexes[c]].push_back({r.time_us, value});
              }
            }
          }
        }
        return result;
      });
}

absl::Status PgChartReads::StreamRawSamples(int32_t trial_id,
                                      const std::vector<SeriesInfo>& series,
                                      int64_t from_us, int64_t to_us, absl::Time deadline,
                                      RawSampleSink& sink) {
  bool handed_out = false;
  // One snapshot for the horizon and every page.
  return RunSnapshot<bool>(
             absl::StrCat("streaming raw samples of trial ", trial_id), deadline,
             [&](pqxx::transaction_base& tx) -> absl::StatusOr<bool> {
               // Run tries again on a fresh connection when one breaks;
               // samples already handed out cannot be taken back.
               if (handed_out) {
                 return absl::UnavailableError(
                     "the database connection was lost during the read");
               }
               RETURN_IF_ERROR(CheckRawHorizon(tx, from_us));
               absl::btree_map<std::string, std::vector<size_t>> by_agent;
               for (size_t i = 0; i < series.size(); ++i) {
                 by_agent[series[i].agent_id].push_back(i);
               }
               struct AgentStream {
                 std::vector<size_t> indexes;  // into the read's series, per column
                 std::unique_ptr<AgentReportScan> scan;
                 std::vector<StoredReport> page;
                 size_t next = 0;
               };
               std::vector<AgentStream> agents;
               for (const auto& [agent, indexes] : by_agent) {
                 AgentStream& a = agents.emplace_back();
                 a.indexes = indexes;
                 a.scan = std::make_unique<AgentReportScan>(
                     tx, trial_id, agent, WantedOf(series, indexes), from_us, to_us,
                     /*prepared=*/true);
               }
               // Whether the agent has a next report (then at page[next]).
               auto more = [](AgentStream& a) -> absl::StatusOr<bool> {
                 if (a.next < a.page.size()) return true;
                 a.next = 0;
                 return a.scan->Next(a.page);
               };
               // Agents by their next report's (time, agent): a k-way merge.
               using Next = std::pair<int64_t, size_t>;
               std::priority_queue<Next, std::vector<Next>, std::greater<Next>> order;
               for (size_t i = 0; i < agents.size(); ++i) {
                 ASSIGN_OR_RETURN(const bool has, more(agents[i]));
                 if (has) order.emplace(agents[i].page[0].time_us, i);
               }
               while (!order.empty()) {
                 const size_t i = order.top().second;
                 order.pop();
                 AgentStream& a = agents[i];
                 const StoredReport& r = a.page[a.next++];
                 // The report's values in the order of the read's list.
                 for (const auto& [c, value] : r.values) {
                   handed_out = true;
                   RETURN_IF_ERROR(sink.Take(a.indexes[c], {r.time_us, value}));
                 }
                 ASSIGN_OR_RETURN(const bool has, more(a));
                 if (has) order.emplace(a.page[a.next].time_us, i);
               }
               return true;
             })
      .status();
}

}  // namespace metrics::storage::pg
