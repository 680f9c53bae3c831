// PgFleetReads: the reads across every active trial that /metrics and the
// trial list's staleness make (each agent's latest values, when agents last
// reported), on the primary's pool. Their statements are written out per
// call (their pages' keys vary), so nothing is prepared.
//
// Usage:
//   PgFleetReads reads(pool, "");
//   absl::StatusOr<LatestValues> latest =
//       reads.LatestValuesOfActiveTrials(1000, live_since_us, deadline);
//
// Thread-safety: thread-safe (the pool is; each call leases a connection).
#ifndef METRICS_STORAGE_PG_READS_FLEET_READS_H_
#define METRICS_STORAGE_PG_READS_FLEET_READS_H_

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

class PgFleetReads : private PgReadsBase {
 public:
  // `where` ends the operation named in errors ("" or " on the standby").
  PgFleetReads(ConnectionPool& pool, std::string where)
      : PgReadsBase(pool, std::move(where)) {}

  // As MetricStore's methods of the same names.
  absl::StatusOr<LatestValues> LatestValuesOfActiveTrials(
      size_t limit, int64_t live_since_us, absl::Time deadline);
  absl::StatusOr<std::vector<AgentActivity>> AgentActivityOfTrials(
      const std::vector<int32_t>& trial_ids, absl::Time deadline);
};

}  // namespace metrics::storage::pg

#endif  // METRICS_STORAGE_PG_READS_FLEET_READS_H_
