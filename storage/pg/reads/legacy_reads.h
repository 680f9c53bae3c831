// PgLegacyReads: the reads behind the deprecated profiler endpoints (every
// metric group's series, one series' readings a page at a time after a
// cursor), on the primary's pool.
//
// Usage:
//   PgLegacyReads reads(pool, "");
//   absl::StatusOr<std::vector<Reading>> page =
//       reads.ReadReadings(7, series, ReadingCursor{}, 100, deadline);
//
// Thread-safety: thread-safe (the pool is; each call leases a connection).
#ifndef METRICS_STORAGE_PG_READS_LEGACY_READS_H_
#define METRICS_STORAGE_PG_READS_LEGACY_READS_H_

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

class PgLegacyReads : private PgReadsBase {
 public:
  // `where` ends the operation named in errors ("" or " on the standby").
  PgLegacyReads(ConnectionPool& pool, std::string where)
      : PgReadsBase(pool, std::move(where)) {}

  // The statements these reads prepare: every connection of their pool
  // must have them (ConnectionPoolOptions).
  static std::vector<PreparedStatement> Statements();

  // As MetricStore's methods of the same names.
  absl::StatusOr<std::vector<SeriesInfo>> ListSeriesOfEveryGroup(
      int32_t trial_id, absl::Time deadline);
  absl::StatusOr<std::vector<Reading>> ReadReadings(int32_t trial_id,
                                                    const SeriesInfo& series,
                                                    ReadingCursor after,
                                                    size_t limit,
                                                    absl::Time deadline);
};

}  // namespace metrics::storage::pg

#endif  // METRICS_STORAGE_PG_READS_LEGACY_READS_H_
