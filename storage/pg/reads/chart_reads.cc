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
#include "storage/pg/reads/raw_values.h"
#include "storage/pg/reads/rollup_rows.h"
#include "storage/pg/rollup_sql.h"
#include "storage/pg/sql_arrays.h"
#include "storage/pg/sql_time.h"
#include "storage/pg/trial_rows.h"
#include "storage/rollup.h"

namespace metrics::storage::pg {

namespace {

// One agent's rows of a streamed raw read, a page at a time, after a
// (time, row id) key.
struct AgentPages {
  std::string agent;
  std::vector<size_t> indexes;  // into the read's series, per column
  std::unique_ptr<RawValueColumns> columns;
  pqxx::result page;
  pqxx::result::size_type next = 0;
  int64_t after_time = 0, after_id = 0;
  bool started = false, last_page = false;
};

// Rows of one page of a streamed read: at 25 values a row, a few MB per
// agent at most.
constexpr int kStreamPageRows = 2000;


constexpr int kCoarsestWidthSeconds =
    kRollupWidthsSeconds[std::size(kRollupWidthsSeconds) - 1];

// The chart reads' frequent statements, prepared on each pool connection.
struct Statements {
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

  // `columns` of an agent's ($2) system rows of a trial ($1) from $3 to $4
  // (microseconds), in ingest order, at most $5: a range scan of
  // metrics_profiling_system_idx.
  static std::string RowsInWindowSql(absl::string_view columns) {
    return absl::StrCat("SELECT ", EpochMicrosSql("end_time"), ", ", columns,
                        " FROM metrics_profiling WHERE trial_id = $1 AND ",
                        SystemRowsOfAgentSql("$2"), " AND end_time >= ",
                        TimestampFromMicrosSql("$3"), " AND end_time < ",
                        TimestampFromMicrosSql("$4"),
                        " ORDER BY end_time, id LIMIT $5");
  }

  // An agent's raw rows in a window, packed values only: a statement that
  // stays the same whatever series are read, so it is planned once (written
  // out per read, with a jsonb column per series for rows of the older
  // form, planning took about 1.4 ms of PostgreSQL's CPU a read, several
  // times running it). Rows of the jsonb form come with NULL packed_values.
  PreparedStatement system_rows_packed{"system_rows_packed",
                                       RowsInWindowSql("packed_values")};
  PreparedStatement raw_horizon{
      "raw_horizon",
      absl::StrCat("SELECT ", EpochMicrosSql("horizon"), " FROM raw_retention")};

  std::vector<PreparedStatement> All() const {
    return {TrialExistsStatement(), list_trials,        series_of_group,
            coarsest_rollups,       system_rows_packed, raw_horizon};
  }
};

const Statements& Sql() {
  static const auto* statements = new Statements();
  return *statements;
}

// OUT_OF_RANGE when raw samples from `from_us` on may have expired: the
// window starts before the raw data horizon that raw retention recorded.
absl::Status CheckRawHorizon(pqxx::transaction_base& tx, int64_t from_us) {
  if (const pqxx::result horizon = tx.exec_prepared(Sql().raw_horizon.name);
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

}  // namespace

std::vector<PreparedStatement> PgChartReads::Statements() { return Sql().All(); }

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
        pqxx::result r = tx.exec_prepared(Sql().list_trials.name, state,
                                          filter.before_id, filter.limit);
        std::vector<Trial> trials;
        trials.reserve(r.size());
        for (const pqxx::row& row : r) trials.push_back(TrialFromRow(row));
        return trials;
      });
}

absl::StatusOr<std::vector<SeriesInfo>> PgChartReads::ListSeries(
    int32_t trial_id, bool extents, absl::Time deadline) {
  return Run<std::vector<SeriesInfo>>(
      absl::StrCat("listing the series of trial ", trial_id), deadline,
      [&](pqxx::transaction_base& tx) -> absl::StatusOr<std::vector<SeriesInfo>> {
        RETURN_IF_ERROR(CheckTrialExists(tx, trial_id));
        std::vector<SeriesInfo> series;
        absl::flat_hash_map<int64_t, size_t> by_id;
        for (const auto& row : tx.exec_prepared(Sql().series_of_group.name,
                                                trial_id,
                                                std::string(kSystemGroup))) {
          SeriesInfo info = SeriesFromRow(row);
          by_id[info.series_id] = series.size();
          series.push_back(std::move(info));
        }
        NumberGpus(series);
        if (!extents || series.empty()) return series;
        // The coarsest buckets hold every sample once: their counts add up
        // to the total, and their first and last times bound the series.
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
        RollupRow bucket;
        for (const auto& row : tx.exec_prepared(Sql().coarsest_rollups.name,
                                                trial_id, TextArray(agents))) {
          ASSIGN_OR_RETURN(const bool kept, decoder.Decode(row, bucket));
          if (!kept) continue;
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
        }
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
  const RollupRowDecoder decoder(width_s, window, std::move(wanted));
  // Rows a fetch brings at most: a window of thousands of buckets is read
  // through a cursor, so the client holds one page of (hex) rows at a time.
  constexpr int kRowsPerFetch = 500;
  // The value is unused: the rows went to the sink.
  const absl::StatusOr<bool> read = Run<bool>(
      absl::StrCat("reading rollups of trial ", trial_id), deadline,
      [&](pqxx::transaction_base& tx) -> absl::StatusOr<bool> {
        sink.Restart();
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
            if (kept) sink.Take(r);
          }
          if (rows.size() < kRowsPerFetch) return true;
        }
      });
  return read.status();
}

absl::StatusOr<std::vector<std::vector<Sample>>>
PgChartReads::ReadRawSamples(int32_t trial_id,
                                  const std::vector<SeriesInfo>& series,
                                  int64_t from_us, int64_t to_us,
                                  int64_t max_reports, absl::Time deadline) {
  return Run<std::vector<std::vector<Sample>>>(
      absl::StrCat("reading raw samples of trial ", trial_id), deadline,
      [&](pqxx::transaction_base& tx)
          -> absl::StatusOr<std::vector<std::vector<Sample>>> {
        std::vector<std::vector<Sample>> result(series.size());
        // One snapshot for the horizon and the rows: retention records its
        // horizon before it removes a row, so rows after a horizon this
        // snapshot has not seen are all still here.
        tx.exec("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ");
        RETURN_IF_ERROR(CheckRawHorizon(tx, from_us));
        // One scan per agent, decoding every wanted series of it (a
        // statement of its own, so not prepared). Relies on the index
        // metrics_profiling_system_idx: a range scan in time, then ingest
        // order.
        absl::btree_map<std::string, std::vector<size_t>> by_agent;
        for (size_t i = 0; i < series.size(); ++i) {
          by_agent[series[i].agent_id].push_back(i);
        }
        for (const auto& [agent, indexes] : by_agent) {
          std::vector<RawValueColumns::Series> wanted;
          for (size_t i : indexes) {
            wanted.push_back(
                {series[i].series_id, series[i].name, series[i].gpu_uuid});
          }
          const RawValueColumns columns(tx, wanted);
          // One row past the limit tells that there are more. Packed rows
          // first; only where a row of the jsonb form is among them, again
          // with a column per series (the same snapshot).
          pqxx::result rows = tx.exec_prepared(
              Sql().system_rows_packed.name, trial_id, agent, from_us, to_us,
              max_reports + 1);
          const bool all_packed =
              std::all_of(rows.begin(), rows.end(),
                          [](const pqxx::row& row) { return !row[1].is_null(); });
          if (!all_packed) {
            rows = tx.exec_params(Statements::RowsInWindowSql(columns.sql()),
                                  trial_id, agent, from_us, to_us,
                                  max_reports + 1);
          }
          if (static_cast<int64_t>(rows.size()) > max_reports) {
            return absl::ResourceExhaustedError(absl::StrCat(
                "agent ", agent, " has more than ", max_reports,
                " reports in the window"));
          }
          const std::vector<size_t>& of_agent = indexes;  // capturable
          for (const auto& row : rows) {
            const int64_t t = row[0].as<int64_t>();
            RETURN_IF_ERROR(columns.Read(row, 1, [&](size_t c, double value) {
              result[of_agent[c]].push_back({t, value});
            }));
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
  return Run<bool>(
             absl::StrCat("streaming raw samples of trial ", trial_id), deadline,
             [&](pqxx::transaction_base& tx) -> absl::StatusOr<bool> {
               // Run tries again on a fresh connection when one breaks;
               // samples already handed out cannot be taken back.
               if (handed_out) {
                 return absl::UnavailableError(
                     "the database connection was lost during the read");
               }
               // One snapshot for the horizon and every page.
               tx.exec("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ");
               RETURN_IF_ERROR(CheckRawHorizon(tx, from_us));
               absl::btree_map<std::string, std::vector<size_t>> by_agent;
               for (size_t i = 0; i < series.size(); ++i) {
                 by_agent[series[i].agent_id].push_back(i);
               }
               std::vector<AgentPages> agents;
               for (const auto& [agent, indexes] : by_agent) {
                 std::vector<RawValueColumns::Series> wanted;
                 for (size_t i : indexes) {
                   wanted.push_back({series[i].series_id, series[i].name, series[i].gpu_uuid});
                 }
                 AgentPages& a = agents.emplace_back();
                 a.agent = agent;
                 a.indexes = indexes;
                 a.columns = std::make_unique<RawValueColumns>(tx, wanted);
               }
               // The agent's next page; false when it has no more rows.
               auto fetch = [&](AgentPages& a) {
                 if (a.last_page) return false;
                 // Keyset paging on the index's (end_time) then row id:
                 // rows at the last time with a larger id, then later rows.
                 const std::string sql = absl::StrCat(
                     "SELECT ", EpochMicrosSql("end_time"), ", id, ", a.columns->sql(),
                     " FROM metrics_profiling WHERE trial_id = $1 AND ",
                     SystemRowsOfAgentSql("$2"), " AND end_time >= ",
                     TimestampFromMicrosSql("$3"), " AND end_time < ",
                     TimestampFromMicrosSql("$4"),
                     a.started ? absl::StrCat(" AND end_time >= ", TimestampFromMicrosSql("$5"),
                                              " AND (end_time > ", TimestampFromMicrosSql("$5"),
                                              " OR id > $6)")
                               : "",
                     " ORDER BY end_time, id LIMIT ", kStreamPageRows);
                 a.page = a.started ? tx.exec_params(sql, trial_id, a.agent, from_us, to_us,
                                                     a.after_time, a.after_id)
                                    : tx.exec_params(sql, trial_id, a.agent, from_us, to_us);
                 a.started = true;
                 a.next = 0;
                 a.last_page = a.page.size() < static_cast<size_t>(kStreamPageRows);
                 return !a.page.empty();
               };
               // Agents by their next row's (time, agent id): a k-way merge.
               using Next = std::pair<int64_t, size_t>;
               std::priority_queue<Next, std::vector<Next>, std::greater<Next>> order;
               for (size_t i = 0; i < agents.size(); ++i) {
                 if (fetch(agents[i])) order.emplace(agents[i].page[0][0].as<int64_t>(), i);
               }
               std::vector<std::pair<size_t, double>> values;
               while (!order.empty()) {
                 const size_t i = order.top().second;
                 order.pop();
                 AgentPages& a = agents[i];
                 const pqxx::row row = a.page[a.next++];
                 const int64_t t = row[0].as<int64_t>();
                 // The row's values in the order of the read's list.
                 values.clear();
                 RETURN_IF_ERROR(a.columns->Read(row, 2, [&](size_t c, double value) {
                   values.emplace_back(a.indexes[c], value);
                 }));
                 std::sort(values.begin(), values.end());
                 for (const auto& [index, value] : values) {
                   handed_out = true;
                   RETURN_IF_ERROR(sink.Take(index, {t, value}));
                 }
                 a.after_time = t;
                 a.after_id = row[1].as<int64_t>();
                 if (a.next < a.page.size() || fetch(a)) {
                   order.emplace(a.page[a.next][0].as<int64_t>(), i);
                 }
               }
               return true;
             })
      .status();
}

}  // namespace metrics::storage::pg
