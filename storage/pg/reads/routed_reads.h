// RoutedReads: the chart reads of a store with a standby. Each read goes to
// the standby's PgChartReads while the standby is current (ReadReplica decides),
// else to the primary's; a standby read that fails in a way the primary may
// not (a lost connection, a recovery conflict, a trial not replayed yet) is
// read again from the primary.
//
// Thread-safety: thread-safe.
#ifndef METRICS_STORAGE_PG_READS_ROUTED_READS_H_
#define METRICS_STORAGE_PG_READS_ROUTED_READS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "storage/metric_store.h"
#include "storage/pg/reads/read_replica.h"
#include "storage/pg/reads/chart_reads.h"

namespace metrics::storage::pg {

class RoutedReads : public ChartReads {
 public:
  // All three must outlive this.
  RoutedReads(PgChartReads* primary, PgChartReads* standby, ReadReplica* replica)
      : primary_(primary), standby_(standby), replica_(replica) {}

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

 private:
  // `read(reads)` on the standby's reads when it is current, else (or
  // when it failed there in a way the primary may not) the primary's.
  template <typename T, typename Body>
  absl::StatusOr<T> Route(Body read);

  PgChartReads* const primary_;
  PgChartReads* const standby_;
  ReadReplica* const replica_;
};

}  // namespace metrics::storage::pg

#endif  // METRICS_STORAGE_PG_READS_ROUTED_READS_H_
