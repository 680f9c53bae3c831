#include "storage/pg/reads/legacy_reads.h"

#include <pqxx/result>
#include <pqxx/transaction>

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "storage/pg/reads/agent_reports.h"
#include "storage/pg/reads/raw_values.h"
#include "storage/pg/sql_time.h"
#include "storage/report_json.h"

namespace metrics::storage::pg {

namespace {

struct LegacyStatements {
  PreparedStatement series_of_every_group{
      "series_of_every_group",
      absl::StrCat("SELECT ", kSeriesColumnsSql,
                   " FROM series WHERE trial_id = $1 "
                   "ORDER BY metric_group, agent_id, name, gpu_uuid")};
  // Rows of an agent from a cursor ($3 time, $4 row id) on, in ingest
  // order, in the other groups than system ($8): a range scan of
  // metrics_profiling_other_idx. The value columns are RawValueColumns'
  // for the series (name $6, GPU $7).
  PreparedStatement other_rows_after{
      "other_rows_after",
      RowsAfterSql("metric_group = $8 AND metric_group <> 'system' AND "
                   "agent_id = $2")};

  static std::string RowsAfterSql(absl::string_view rows_of_agent) {
    return absl::StrCat(
        "SELECT ", EpochMicrosSql("end_time"), ", id, total_batches, "
        "packed_values, ", ReportValueSql("metrics", "$6::text", "$7::text"),
        " FROM metrics_profiling WHERE trial_id = $1 AND ", rows_of_agent,
        " AND end_time >= ", TimestampFromMicrosSql("$3"),
        " AND (end_time, id) > (", TimestampFromMicrosSql("$3"),
        ", $4) ORDER BY end_time, id LIMIT $5");
  }

  std::vector<PreparedStatement> All() const {
    return {TrialExistsStatement(), series_of_every_group, other_rows_after,
            AgentReportScan::Statement()};
  }
};

const LegacyStatements& LegacySql() {
  static const auto* statements = new LegacyStatements();
  return *statements;
}

}  // namespace

std::vector<PreparedStatement> PgLegacyReads::Statements() { return LegacySql().All(); }

absl::StatusOr<std::vector<SeriesInfo>> PgLegacyReads::ListSeriesOfEveryGroup(
    int32_t trial_id, absl::Time deadline) {
  return Run<std::vector<SeriesInfo>>(
      absl::StrCat("listing the series of trial ", trial_id), deadline,
      [&](pqxx::transaction_base& tx) -> absl::StatusOr<std::vector<SeriesInfo>> {
        RETURN_IF_ERROR(CheckTrialExists(tx, trial_id));
        std::vector<SeriesInfo> series;
        for (const auto& row :
             tx.exec_prepared(LegacySql().series_of_every_group.name, trial_id)) {
          series.push_back(SeriesFromRow(row));
        }
        return series;
      });
}

absl::StatusOr<std::vector<Reading>> PgLegacyReads::ReadReadings(
    int32_t trial_id, const SeriesInfo& series, ReadingCursor after,
    size_t limit, absl::Time deadline) {
  return Run<std::vector<Reading>>(
      absl::StrCat("reading series \"", series.name, "\" of trial ",
                          trial_id),
      deadline,
      [&](pqxx::transaction_base& tx) -> absl::StatusOr<std::vector<Reading>> {
        std::vector<Reading> readings;
        if (limit == 0) return readings;
        ReadingCursor cursor{std::max(after.time_us, kYearOneMicros), after.row_id};
        if (series.metric_group == kSystemGroup) {
          // Reports of every stored form, sealed windows too.
          AgentReportScan scan(tx, trial_id, series.agent_id,
                               {{series.series_id, series.name, series.gpu_uuid}},
                               cursor.time_us, kYearTenThousandMicros, /*prepared=*/true);
          scan.After({cursor.time_us, cursor.row_id, after.index});
          std::vector<StoredReport> page;
          while (true) {
            ASSIGN_OR_RETURN(const bool more, scan.Next(page));
            if (!more) return readings;
            for (const StoredReport& report : page) {
              if (report.values.empty()) continue;
              readings.push_back({report.time_us, report.row_id, report.index, report.batch,
                                  report.values[0].second});
              if (readings.size() == limit) return readings;
            }
          }
        }
        // Decodes the columns from packed_values on (as RawValueColumns
        // lays them out, here with parameters for the name and GPU).
        const RawValueColumns columns(
            tx, {{series.series_id, series.name, series.gpu_uuid}});
        // Rows without the series are skipped here, so a page of rows may
        // give fewer readings than asked: read pages until enough.
        for (;;) {
          const pqxx::result rows = tx.exec_prepared(
              LegacySql().other_rows_after.name, trial_id, series.agent_id, cursor.time_us,
              cursor.row_id, static_cast<int64_t>(limit), series.name, series.gpu_uuid,
              series.metric_group);
          for (const auto& row : rows) {
            Reading r;
            r.time_us = cursor.time_us = row[0].as<int64_t>();
            r.row_id = cursor.row_id = row[1].as<int64_t>();
            if (!row[2].is_null()) r.batch = row[2].as<int32_t>();
            bool found = false;
            RETURN_IF_ERROR(columns.Read(row, 3, [&](size_t, double value) {
              r.value = value;
              found = true;
            }));
            if (!found) continue;
            readings.push_back(r);
            if (readings.size() == limit) return readings;
          }
          if (rows.size() < limit) return readings;
        }
      });
}

}  // namespace metrics::storage::pg
