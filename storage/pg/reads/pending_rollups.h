// PendingRollups: the rollup buckets of the raw system rows not yet in
// system_rollups (packed format 2, packed_report.h: ingest writes no
// rollups; the sealer adds a window's rows when it seals it). A reader of
// stored rollups reads these in the same snapshot and hands each bucket
// out in time order among the stored ones of its agent (PendingMerger), so
// every sample counts once whether its window is sealed or not. These are
// normally the last ten-odd minutes of each agent, plus late rows into
// sealed windows.
//
// Thread-safety: thread-compatible; use from the transaction's thread.
#ifndef METRICS_STORAGE_PG_READS_PENDING_ROLLUPS_H_
#define METRICS_STORAGE_PG_READS_PENDING_ROLLUPS_H_

#include <pqxx/result>
#include <pqxx/transaction_base>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "storage/metric_store.h"
#include "storage/pg/prepared.h"
#include "storage/pg/reads/rollup_rows.h"

namespace metrics::storage::pg {

class PendingRollups {
 public:
  // The buckets of `width_s` of the format-2 rows of `agents` (trial
  // `trial_id`) whose bucket starts are in `window` (every bucket without
  // one), with the series of `wanted` (sorted; every series without it).
  // DATA_LOSS for a row whose values do not decode.
  // Read's first page; the connection must have it prepared.
  static PreparedStatement Statement();
  static absl::StatusOr<PendingRollups> Read(
      pqxx::transaction_base& tx, int32_t trial_id, const std::vector<std::string>& agents,
      int width_s, std::optional<BucketWindow> window,
      const std::optional<std::vector<int64_t>>& wanted);

  // Hands `take` the buckets of `agent` that start before `before_us`, in
  // order, and forgets them: call before taking a stored row of that agent
  // and start (a pending bucket of the same start comes after it, its
  // samples having been ingested later).
  void TakeBefore(const std::string& agent, int64_t before_us,
                  absl::FunctionRef<void(const RollupRow&)> take);
  // Hands `take` every bucket not taken yet.
  void TakeRest(absl::FunctionRef<void(const RollupRow&)> take);

 private:
  // Adds the rows (agent, time, packed values) to their buckets of `width_us`.
  absl::Status Add(const pqxx::result& rows, int64_t width_us,
                   const std::optional<std::vector<int64_t>>& wanted);

  // By (agent, bucket start).
  std::map<std::pair<std::string, int64_t>, RollupRow> buckets_;
};

// Hands `out` the stored rows it takes, each pending bucket in its place
// among them (PendingRollups::TakeBefore); Finish hands the rest.
class PendingMerger {
 public:
  PendingMerger(RollupSink& out, PendingRollups pending)
      : out_(out), pending_(std::move(pending)) {}

  void Take(const RollupRow& row);
  void Finish();

 private:
  RollupSink& out_;
  PendingRollups pending_;
};

}  // namespace metrics::storage::pg

#endif  // METRICS_STORAGE_PG_READS_PENDING_ROLLUPS_H_
