// PgTrialReads: the reads that open a trial's calls and streams (a trial,
// a stream's start with its last sequence, the agents' inventories), on the
// primary's pool: what they read decides what ingest does next.
//
// Usage:
//   PgTrialReads reads(pool, "");
//   absl::StatusOr<Trial> trial = reads.GetTrial(7, deadline);
//
// Thread-safety: thread-safe (the pool is; each call leases a connection).
#ifndef METRICS_STORAGE_PG_READS_TRIAL_READS_H_
#define METRICS_STORAGE_PG_READS_TRIAL_READS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "storage/metric_store.h"
#include "storage/pg/connection_pool.h"
#include "storage/pg/prepared.h"
#include "storage/pg/reads/read_base.h"

namespace metrics::storage::pg {

class PgTrialReads : private PgReadsBase {
 public:
  // `where` ends the operation named in errors ("" or " on the standby").
  PgTrialReads(ConnectionPool& pool, std::string where)
      : PgReadsBase(pool, std::move(where)) {}

  // The statements these reads prepare: every connection of their pool
  // must have them (ConnectionPoolOptions).
  static std::vector<PreparedStatement> Statements();

  // As MetricStore's methods of the same names.
  absl::StatusOr<Trial> GetTrial(int32_t id, absl::Time deadline);
  absl::StatusOr<StreamStart> GetStreamStart(int32_t trial_id,
                                             absl::string_view stream_id,
                                             absl::Time deadline);
  absl::StatusOr<std::vector<StoredInventory>> InventoriesOfTrial(
      int32_t trial_id, absl::Time deadline);
};

}  // namespace metrics::storage::pg

#endif  // METRICS_STORAGE_PG_READS_TRIAL_READS_H_
