#include "storage/pg/generic_reports.h"

#include <pqxx/result>
#include <pqxx/transaction>

#include <limits>
#include <optional>
#include <string>

#include "absl/strings/str_cat.h"
#include "storage/pg/pooled_transaction.h"
#include "storage/pg/sql_time.h"
#include "storage/pg/trial_rows.h"

namespace metrics::storage::pg {

namespace {

// The key of a report's values in its row: the platform keeps validation
// values under another name.
std::string ValuesKey(absl::string_view group) {
  return group == "validation" ? "validation_metrics" : "avg_metrics";
}

// The report's row document. Its parts are JSON texts the server made, so
// joining them is JSON; PostgreSQL's jsonb cast checks it all the same.
std::string Body(const GenericReport& report) {
  if (report.group == "validation") {
    return absl::StrCat("{\"validation_metrics\":", report.avg_metrics, "}");
  }
  return absl::StrCat("{\"avg_metrics\":", report.avg_metrics,
                      ",\"batch_metrics\":",
                      report.batch_metrics.value_or("null"), "}");
}

std::string StepsText(const GenericReport& report) {
  return absl::StrCat("the report of steps ", *report.steps_completed,
                      " in group \"", report.group, "\" of trial ",
                      report.trial_id);
}

}  // namespace

absl::StatusOr<Trial> BeginTrialRun(ConnectionPool& pool, int32_t trial_id,
                                    int32_t run_id, absl::Time deadline) {
  return Write<Trial>(
      pool, absl::StrCat("recording run ", run_id, " of trial ", trial_id),
      deadline, [&](pqxx::transaction_base& tx) -> absl::StatusOr<Trial> {
        // Writes the row only when the run is newer: most calls just read.
        // An ended trial keeps its runs (its reports are refused).
        pqxx::result r = tx.exec_params(
            absl::StrCat("UPDATE trials SET run_id = $2, updated_at = now() "
                         "WHERE id = $1 AND state = 'ACTIVE' "
                         "AND (run_id IS NULL OR run_id < $2) RETURNING ",
                         TrialColumnsSql()),
            trial_id, run_id);
        if (!r.empty()) return TrialFromRow(r[0]);
        r = tx.exec_params(absl::StrCat("SELECT ", TrialColumnsSql(),
                                        " FROM trials WHERE id = $1"),
                           trial_id);
        if (r.empty()) {
          return absl::NotFoundError(
              absl::StrCat("metrics.trialId: trial ", trial_id, " does not exist"));
        }
        Trial trial = TrialFromRow(r[0]);
        if (trial.run_id && *trial.run_id > run_id) {
          return OlderRunError(trial_id, run_id, *trial.run_id);
        }
        return trial;
      });
}

absl::StatusOr<GenericWrite> WriteGenericReport(ConnectionPool& pool,
                                                const GenericReport& report,
                                                absl::Time deadline) {
  const std::string partition(PartitionOfGroup(report.group));
  const std::string key = ValuesKey(report.group);
  return Write<GenericWrite>(
      pool,
      absl::StrCat("storing a \"", report.group, "\" report of trial ",
                   report.trial_id),
      deadline, [&](pqxx::transaction_base& tx) -> absl::StatusOr<GenericWrite> {
        // The trial's row lock orders this report after any other of the
        // trial: a copy arriving at once waits, then finds this one's row.
        pqxx::result trial = tx.exec_params(
            "SELECT state, run_id FROM trials WHERE id = $1 FOR UPDATE",
            report.trial_id);
        if (trial.empty()) {
          return absl::NotFoundError(absl::StrCat(
              "metrics.trialId: trial ", report.trial_id, " does not exist"));
        }
        const std::optional<TrialState> state =
            ParseTrialState(trial[0][0].as<std::string>());
        if (absl::Status takes = CheckTrialTakesMetrics(
                "metrics.trialId", report.trial_id,
                state.value_or(TrialState::kActive));
            !takes.ok()) {
          return takes;
        }
        const bool run_known = !trial[0][1].is_null();
        if (run_known && trial[0][1].as<int32_t>() > report.run_id) {
          return OlderRunError(report.trial_id, report.run_id,
                               trial[0][1].as<int32_t>());
        }
        if (!run_known || trial[0][1].as<int32_t>() < report.run_id) {
          tx.exec_params(
              "UPDATE trials SET run_id = $2, updated_at = now() WHERE id = $1",
              report.trial_id, report.run_id);
        }
        // A restarted run archives what it has passed, as the platform does:
        // older runs' rows after its step, and at its step in its own
        // partition. The implied `total_batches >= $3` lets each partition's
        // step index bound the scan.
        const int32_t steps = report.steps_completed.value_or(0);
        tx.exec_params(
            "UPDATE metrics SET archived = true "
            "WHERE trial_id = $1 AND partition_type IN "
            "('TRAINING', 'VALIDATION', 'GENERIC') AND NOT archived "
            "AND trial_run_id < $2 AND total_batches >= $3 "
            "AND ((partition_type <> $4 AND total_batches > $3) "
            "OR (partition_type = $4 AND total_batches >= $3))",
            report.trial_id, report.run_id, steps, partition);

        const std::string body = Body(report);
        // The platform keeps no batch metrics for validation.
        const bool has_batches =
            report.batch_metrics.has_value() && report.group != "validation";
        if (report.steps_completed.has_value()) {
          // The row of this step, and how the report compares with it.
          const pqxx::result row = tx.exec_params(
              "SELECT m.id, m.metrics = $1::jsonb, "
              "coalesce(m.metrics->'batch_metrics', 'null') <> 'null', "
              "(SELECT n.key FROM jsonb_each(m.metrics->$3) o "
              "JOIN jsonb_each($2::jsonb) n USING (key) "
              "WHERE o.value <> n.value ORDER BY n.key LIMIT 1) "
              "FROM metrics m WHERE m.trial_id = $4 "
              "AND m.partition_type = $5 AND m.metric_group = $6 "
              "AND m.total_batches = $7 AND NOT m.archived "
              "ORDER BY m.id LIMIT 1 FOR UPDATE",
              body, report.avg_metrics, key, report.trial_id, partition,
              report.group, *report.steps_completed);
          if (!row.empty()) {
            if (row[0][1].as<bool>()) return GenericWrite::kDuplicate;
            if (row[0][2].as<bool>() && has_batches) {
              return absl::FailedPreconditionError(absl::StrCat(
                  "metrics.metrics.batchMetrics: ", StepsText(report),
                  " has batch metrics already"));
            }
            if (!row[0][3].is_null()) {
              return absl::FailedPreconditionError(absl::StrCat(
                  "metrics.metrics.avgMetrics.", row[0][3].as<std::string>(),
                  ": ", StepsText(report), " has another value for it"));
            }
            const int64_t id = row[0][0].as<int64_t>();
            const std::string merged =
                "jsonb_set(metrics, ARRAY[$2], "
                "coalesce(metrics->$2, '{}') || $1::jsonb)";
            if (has_batches) {
              tx.exec_params(
                  absl::StrCat("UPDATE metrics SET metrics = jsonb_set(", merged,
                               ", '{batch_metrics}', $3::jsonb) "
                               "WHERE trial_id = $4 AND id = $5"),
                  report.avg_metrics, key, *report.batch_metrics,
                  report.trial_id, id);
            } else {
              tx.exec_params(
                  absl::StrCat("UPDATE metrics SET metrics = ", merged,
                               " WHERE trial_id = $3 AND id = $4"),
                  report.avg_metrics, key, report.trial_id, id);
            }
            return GenericWrite::kMerged;
          }
        }
        const std::optional<int64_t> time = report.time_us;
        tx.exec_params(
            absl::StrCat(
                "INSERT INTO metrics (trial_id, partition_type, metric_group, "
                "end_time, total_batches, metrics, trial_run_id) VALUES ($1, $2, "
                "$3, coalesce(", TimestampFromMicrosSql("$4::bigint"),
                ", now()), $5, $6::jsonb, $7)"),
            report.trial_id, partition, report.group, time,
            report.steps_completed, body, report.run_id);
        return GenericWrite::kStored;
      });
}

absl::StatusOr<std::vector<GenericRow>> ReadGenericReports(
    ConnectionPool& pool, int32_t trial_id, absl::string_view group,
    int32_t after_batches, size_t limit, absl::Time deadline) {
  const std::string partition(PartitionOfGroup(group));
  return Read<std::vector<GenericRow>>(
      pool,
      absl::StrCat("reading the \"", group, "\" reports of trial ", trial_id),
      deadline,
      [&](pqxx::transaction_base& tx) -> absl::StatusOr<std::vector<GenericRow>> {
        if (tx.exec_params("SELECT 1 FROM trials WHERE id = $1", trial_id).empty()) {
          return absl::NotFoundError(
              absl::StrCat("trialIds: trial ", trial_id, " does not exist"));
        }
        std::vector<GenericRow> rows;
        // The profiling groups' values are system series, not rows.
        if (partition == "PROFILING") return rows;
        // The training and validation partitions hold their group only.
        const std::optional<std::string> only_group =
            partition == "GENERIC" ? std::optional<std::string>(group)
                                   : std::nullopt;
        const pqxx::result r = tx.exec_params(
            absl::StrCat(
                "SELECT trial_id, id, coalesce(trial_run_id, 0), metric_group, ",
                EpochMicrosSql("end_time"),
                ", total_batches, archived, metrics::text FROM metrics "
                "WHERE trial_id = $1 AND partition_type = $2 "
                "AND ($3::text IS NULL OR metric_group = $3) "
                "AND total_batches > $4 AND NOT archived "
                "ORDER BY trial_run_id, total_batches, id LIMIT $5"),
            trial_id, partition, only_group, after_batches,
            static_cast<int64_t>(limit));
        rows.reserve(r.size());
        for (const pqxx::row& row : r) {
          GenericRow& out = rows.emplace_back();
          out.trial_id = row[0].as<int32_t>();
          out.id = row[1].as<int64_t>();
          out.run_id = row[2].as<int32_t>();
          out.group = row[3].as<std::string>();
          out.time_us = row[4].as<int64_t>();
          out.total_batches = row[5].as<int32_t>();
          out.archived = row[6].as<bool>();
          out.metrics_json = row[7].as<std::string>();
        }
        return rows;
      });
}

}  // namespace metrics::storage::pg
