#include "storage/pg/jobs/rollup_rebuild.h"

#include <pqxx/binarystring>
#include <pqxx/connection>
#include <pqxx/nontransaction>
#include <pqxx/result>
#include <pqxx/transaction>

#include <iterator>
#include <map>
#include <optional>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "storage/pg/connection.h"
#include "storage/pg/lock_keys.h"
#include "storage/pg/pg_errors.h"
#include "storage/pg/reads/agent_reports.h"
#include "storage/pg/reads/raw_values.h"
#include "storage/pg/sql_arrays.h"
#include "storage/pg/sql_time.h"
#include "storage/rollup.h"
#include "storage/format/rollup_codec.h"

namespace metrics::storage::pg {

namespace {

constexpr size_t kWidths = std::size(kRollupWidthsSeconds);
constexpr size_t kBucketsPerInsert = 2000;

// Accumulates one agent's buckets in time order and writes each when time
// has moved past it. Finest buckets are folded into the coarser widths as
// they close, the newest too: what the sealer leaves (sealed_rollups.h).
class AgentRebuild {
 public:
  AgentRebuild(pqxx::work& tx, int32_t trial, std::string agent)
      : tx_(tx), trial_(trial), agent_(std::move(agent)) {}

  void Add(int64_t time_us, int64_t series_id, double value) {
    const int64_t start = BucketStartMicros(time_us, kRollupWidthsSeconds[0]);
    if (open_[0].has_value() && *open_[0] != start) {
      FoldFinest();
      Close(0);
    }
    open_[0] = start;
    stats_[0][series_id].Add(time_us, value);
    ++samples_;
  }

  // Writes what is still open; returns the buckets written.
  int64_t Finish() {
    if (open_[0].has_value()) {
      FoldFinest();
      Close(0);
    }
    for (size_t w = 1; w < kWidths; ++w) {
      if (open_[w].has_value()) Close(w);
    }
    Flush();
    return written_;
  }

  int64_t samples() const { return samples_; }

 private:
  // Adds the open finest bucket to the coarser widths' buckets holding it.
  void FoldFinest() {
    for (size_t w = 1; w < kWidths; ++w) {
      const int64_t start = BucketStartMicros(*open_[0], kRollupWidthsSeconds[w]);
      if (open_[w].has_value() && *open_[w] != start) Close(w);
      open_[w] = start;
      MergeAgentRollup(stats_[w], stats_[0]);
    }
  }

  void Close(size_t w) {
    widths_.push_back(kRollupWidthsSeconds[w]);
    starts_.push_back(*open_[w]);
    blobs_.push_back(EncodeAgentRollup(stats_[w], *open_[w]));
    stats_[w].clear();
    open_[w].reset();
    if (blobs_.size() >= kBucketsPerInsert) Flush();
  }

  void Flush() {
    if (blobs_.empty()) return;
    tx_.exec_params(
        "INSERT INTO system_rollups (trial_id, agent_id, width_s, "
        "bucket_start, stats) "
        "SELECT $1, $2, k.w, timestamptz 'epoch' + k.us * interval "
        "'1 microsecond', k.stats "
        "FROM unnest($3::int[], $4::bigint[], $5::bytea[]) AS k(w, us, stats)",
        trial_, agent_, IntArray(widths_), IntArray(starts_),
        pqxx::binarystring(ByteaArrayBinary(blobs_)));
    written_ += static_cast<int64_t>(blobs_.size());
    widths_.clear();
    starts_.clear();
    blobs_.clear();
  }

  pqxx::work& tx_;
  const int32_t trial_;
  const std::string agent_;
  std::optional<int64_t> open_[kWidths];
  AgentRollup stats_[kWidths];
  std::vector<int64_t> widths_, starts_;
  std::vector<std::string> blobs_;
  int64_t written_ = 0;
  int64_t samples_ = 0;
};

}  // namespace

absl::StatusOr<RebuildSummary> RebuildRollups(
    const std::string& database_url, int32_t trial_id,
    const std::function<void(const RebuildProgress&)>& progress) {
  ASSIGN_OR_RETURN(std::unique_ptr<pqxx::connection> conn,
                   Connect(database_url, "metricsctl-rollups"));
  RebuildProgress state;
  RebuildSummary summary;
  std::vector<std::string> agents;
  RETURN_IF_ERROR(GuardPg("listing the trial's agents", [&]() -> absl::Status {
    pqxx::nontransaction tx(*conn);
    if (tx.exec_params("SELECT 1 FROM trials WHERE id = $1", trial_id).empty()) {
      return absl::NotFoundError(
          absl::StrCat("trial ", trial_id, " does not exist"));
    }
    // Rebuilding buckets whose raw rows retention removed would lose them.
    if (const pqxx::result expired = tx.exec_params(
            "SELECT horizon FROM raw_retention WHERE EXISTS (SELECT 1 FROM "
            "system_rollups WHERE trial_id = $1 AND bucket_start < horizon)",
            trial_id);
        !expired.empty()) {
      return absl::FailedPreconditionError(absl::StrCat(
          "trial ", trial_id, " has data from before ",
          expired[0][0].as<std::string>(),
          ", whose raw rows raw-data retention removed; rebuilding its "
          "rollups would lose those windows"));
    }
    for (const auto& row : tx.exec_params(
             "SELECT DISTINCT agent_id FROM series WHERE trial_id = $1 "
             "AND metric_group = 'system' ORDER BY 1",
             trial_id)) {
      agents.push_back(row[0].as<std::string>());
    }
    // A raw row is a report; a sealed window holds many.
    state.reports_total =
        tx.exec_params("SELECT coalesce(sum(CASE WHEN sealed_values IS NULL THEN 1 ELSE "
                       "(SELECT count(*) FROM metrics_sealed_times(sealed_values)) END), 0) "
                       "FROM metrics_profiling WHERE trial_id = $1 AND metric_group = 'system'",
                       trial_id)[0][0]
            .as<int64_t>();
    return absl::OkStatus();
  }));
  state.agents_total = static_cast<int>(agents.size());

  for (const std::string& agent : agents) {
    state.agent_id = agent;
    RETURN_IF_ERROR(GuardPg(
        absl::StrCat("rebuilding the rollups of agent ", agent),
        [&]() -> absl::Status {
          pqxx::work tx(*conn);
          tx.exec_params("SELECT pg_advisory_xact_lock($1)",
                         RollupLockKey(trial_id, agent));
          std::vector<RawValueColumns::Series> series;
          for (const auto& row : tx.exec_params(
                   "SELECT series_id, gpu_uuid, name FROM series "
                   "WHERE trial_id = $1 AND metric_group = 'system' "
                   "AND agent_id = $2 ORDER BY series_id",
                   trial_id, agent)) {
            series.push_back({row[0].as<int64_t>(), row[2].as<std::string>(),
                              row[1].as<std::string>()});
          }
          tx.exec_params(
              "DELETE FROM system_rollups WHERE trial_id = $1 AND agent_id = $2",
              trial_id, agent);
          // Storage order: the order ingest merged in.
          AgentReportScan scan(tx, trial_id, agent, series, kYearOneMicros, kYearTenThousandMicros,
                               /*prepared=*/false);
          AgentRebuild rebuild(tx, trial_id, agent);
          std::vector<StoredReport> page;
          while (true) {
            ASSIGN_OR_RETURN(const bool more, scan.Next(page));
            if (!more) break;
            for (const StoredReport& report : page) {
              // Not in the rollups yet: its seal adds it.
              if (report.pending) continue;
              for (const auto& [s, v] : report.values) {
                rebuild.Add(report.time_us, series[s].id, v);
              }
            }
            state.reports_done += static_cast<int64_t>(page.size());
            summary.reports += static_cast<int64_t>(page.size());
            if (progress) progress(state);
          }
          summary.buckets += rebuild.Finish();
          summary.samples += rebuild.samples();
          tx.commit();
          return absl::OkStatus();
        }));
    ++state.agents_done;
    ++summary.agents;
    if (progress) progress(state);
  }
  return summary;
}

}  // namespace metrics::storage::pg
