// PgChartReads: the reads behind charts, summaries and exports (trials,
// series with their extents, rollups, raw samples), over one connection
// pool. The store makes one over the primary's pool and, with a standby,
// one over the standby's, which prepares only these statements; its
// routing picks which answers a read (RoutedReads), so a read is written
// once, whichever server runs it.
//
// Usage:
//   PgChartReads reads(pool, "");
//   absl::StatusOr<std::vector<SeriesInfo>> series =
//       reads.ListSeries(7, /*extents=*/true, deadline);
//
// Thread-safety: thread-safe (the pool is; each call leases a connection).
#ifndef METRICS_STORAGE_PG_READS_CHART_READS_H_
#define METRICS_STORAGE_PG_READS_CHART_READS_H_

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

class PgChartReads : public ChartReads, private PgReadsBase {
 public:
  // `where` ends the operation named in errors ("" or " on the standby").
  PgChartReads(ConnectionPool& pool, std::string where)
      : PgReadsBase(pool, std::move(where)) {}

  // The statements these reads prepare: every connection of their pool
  // must have them (ConnectionPoolOptions).
  static std::vector<PreparedStatement> Statements();

  // ChartReads.
  absl::StatusOr<std::vector<Trial>> ListTrials(const TrialListFilter& filter,
                                                absl::Time deadline) override;
  absl::StatusOr<std::vector<SeriesInfo>> ListSeries(
      int32_t trial_id, bool extents, absl::Time deadline) override;
  absl::Status ReadRollups(int32_t trial_id,
                           const std::vector<std::string>& agents, int width_s,
                           const std::vector<int64_t>& series_ids,
                           int64_t from_us, int64_t to_us, absl::Time deadline,
                           RollupSink& sink) override;
  absl::StatusOr<std::vector<std::vector<Sample>>> ReadRawSamples(
      int32_t trial_id, const std::vector<SeriesInfo>& series, int64_t from_us,
      int64_t to_us, int64_t max_reports, absl::Time deadline) override;
  absl::Status StreamRawSamples(int32_t trial_id, const std::vector<SeriesInfo>& series,
                                int64_t from_us, int64_t to_us, absl::Time deadline,
                                RawSampleSink& sink) override;
};

}  // namespace metrics::storage::pg

#endif  // METRICS_STORAGE_PG_READS_CHART_READS_H_
