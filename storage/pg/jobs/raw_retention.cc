#include "storage/pg/jobs/raw_retention.h"

#include <pqxx/connection>
#include <pqxx/nontransaction>
#include <pqxx/result>

#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "storage/pg/connection.h"
#include "storage/pg/jobs/sealer.h"
#include "storage/pg/pg_errors.h"
#include "storage/pg/reads/raw_values.h"
#include "storage/pg/sql_time.h"
#include "storage/format/sealed_window.h"

namespace metrics::storage::pg {

absl::StatusOr<RetentionSummary> ApplyRawRetention(
    const RetentionOptions& options) {
  if (options.raw_retention <= absl::ZeroDuration() ||
      options.raw_retention == absl::InfiniteDuration()) {
    return absl::InvalidArgumentError(
        absl::StrCat("raw retention ", absl::FormatDuration(options.raw_retention),
                     ": must be a positive, finite duration"));
  }
  if (!options.dry_run) {
    // Closed windows sealed first: their raw rows go into the rollups, so
    // what is removed below is kept there.
    SealOptions seal;
    seal.database_url = options.database_url;
    seal.application_name = "metrics-retention-sealer";
    RETURN_IF_ERROR(SealClosedWindows(seal).status());
  }
  ASSIGN_OR_RETURN(std::unique_ptr<pqxx::connection> conn,
                   Connect(options.database_url, "metrics-retention"));
  RetentionSummary summary;
  const int64_t cutoff_us =
      absl::ToUnixMicros(options.now - options.raw_retention);
  std::vector<std::pair<int32_t, std::string>> agents;
  RETURN_IF_ERROR(GuardPg("recording the raw data horizon", [&]() -> absl::Status {
    pqxx::nontransaction tx(*conn);
    // Recorded (and committed) before any row goes; never moved back.
    const std::string horizon =
        options.dry_run
            ? absl::StrCat("SELECT greatest(", TimestampFromMicrosSql("$1"),
                           ", (SELECT horizon FROM raw_retention))")
            : absl::StrCat(
                  "INSERT INTO raw_retention (horizon) VALUES (",
                  TimestampFromMicrosSql("$1"),
                  ") ON CONFLICT (singleton) DO UPDATE SET horizon = "
                  "greatest(raw_retention.horizon, excluded.horizon) "
                  "RETURNING horizon");
    summary.horizon = absl::FromUnixMicros(
        tx.exec_params1(absl::StrCat("WITH r(h) AS (", horizon, ") SELECT ",
                                     EpochMicrosSql("h"), " FROM r"),
                        cutoff_us)[0]
            .as<int64_t>());
    for (const auto& row : tx.exec(
             "SELECT DISTINCT trial_id, agent_id FROM series "
             "WHERE metric_group = 'system' ORDER BY 1, 2")) {
      agents.emplace_back(row[0].as<int32_t>(), row[1].as<std::string>());
    }
    return absl::OkStatus();
  }));
  const int64_t horizon_us = absl::ToUnixMicros(summary.horizon);

  RetentionProgress progress;
  progress.agents_total = static_cast<int>(agents.size());
  for (const auto& pair : agents) {
    // Named copies: lambdas cannot capture structured bindings in C++17.
    const int32_t trial = pair.first;
    const std::string& agent = pair.second;
    progress.trial_id = trial;
    progress.agent_id = agent;
    RETURN_IF_ERROR(GuardPg(
        absl::StrCat("removing old raw rows of agent ", agent, " of trial ",
                     trial),
        [&]() -> absl::Status {
          pqxx::nontransaction tx(*conn);
          // Per index of system rows: raw rows, then sealed windows and the
          // rest. A sealed window (end_time its start) goes once all of it
          // is before the horizon; one across it stays whole, its reports
          // before the horizon out of reads' reach, until a later run. A raw
          // row not in the rollups yet (packed format 2: its window was open
          // at the seal above) waits for its seal; a dry run counts it.
          const std::string sealed_before = absl::StrCat(
              "packed_values IS NULL AND (sealed_values IS NULL OR end_time <= ",
              TimestampFromMicrosSql("$3"), " - interval '", kSealedWindowSeconds,
              " seconds')");
          const std::string raw =
              options.dry_run ? "packed_values IS NOT NULL"
                              : "packed_values IS NOT NULL AND get_byte(packed_values, 0) <> 2";
          for (const std::string& form : {raw, sealed_before}) {
            const std::string rows = absl::StrCat(
                "FROM metrics_profiling WHERE trial_id = $1 AND ",
                SystemRowsOfAgentSql("$2"), " AND ", form, " AND end_time < ",
                TimestampFromMicrosSql("$3"));
            if (options.dry_run) {
              progress.rows +=
                  tx.exec_params1(absl::StrCat("SELECT count(*) ", rows), trial,
                                  agent, horizon_us)[0]
                      .as<int64_t>();
              continue;
            }
            // Each statement is a transaction of its own (autocommit).
            const std::string step = absl::StrCat(
                "DELETE FROM metrics_profiling WHERE ctid = ANY(ARRAY(SELECT "
                "ctid ", rows, " LIMIT $4))");
            for (;;) {
              const int64_t removed = static_cast<int64_t>(
                  tx.exec_params(step, trial, agent, horizon_us,
                                 options.rows_per_step)
                      .affected_rows());
              progress.rows += removed;
              if (options.progress) options.progress(progress);
              if (removed < options.rows_per_step) break;
            }
          }
          return absl::OkStatus();
        }));
    ++progress.agents_done;
    if (options.progress) options.progress(progress);
  }
  summary.agents = progress.agents_total;
  summary.rows = progress.rows;
  if (!options.dry_run && summary.rows > 0) {
    RETURN_IF_ERROR(GuardPg("vacuuming the profiling partition", [&]() {
      pqxx::nontransaction tx(*conn);
      tx.exec("VACUUM metrics_profiling");
      return absl::OkStatus();
    }));
    summary.vacuumed = true;
  }
  return summary;
}

RetentionLoop::RetentionLoop(RetentionOptions options, absl::Duration every,
                             std::function<void(const std::string&)> log)
    : thread_([this, options = std::move(options), every,
               log = std::move(log)]() mutable {
        do {
          options.now = absl::Now();
          absl::StatusOr<RetentionSummary> run = ApplyRawRetention(options);
          if (!run.ok()) {
            log(absl::StrCat("raw retention: ", run.status().message(),
                             "; trying again in ", absl::FormatDuration(every)));
          } else if (run->rows > 0) {
            log(absl::StrCat("raw retention: removed ", run->rows,
                             " raw rows before ",
                             absl::FormatTime(run->horizon)));
          }
        } while (!stop_.WaitForNotificationWithTimeout(every));
      }) {}

RetentionLoop::~RetentionLoop() {
  stop_.Notify();
  thread_.join();
}

}  // namespace metrics::storage::pg
