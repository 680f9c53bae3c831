// PgReads: every read of the metric store, over one connection pool. The
// store makes one over the primary's pool and, with a standby, one over the
// standby's; its routing picks which answers a read (PgMetricStore), so a
// read is written once, whichever server runs it.
//
// Usage:
//   PgReads reads(pool, "");
//   absl::StatusOr<Trial> trial = reads.GetTrial(7, deadline);
//
// Thread-safety: thread-safe (the pool is; each call leases a connection).
#ifndef METRICS_STORAGE_PG_READS_PG_READS_H_
#define METRICS_STORAGE_PG_READS_PG_READS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "storage/metric_store.h"
#include "storage/pg/connection_pool.h"
#include "storage/pg/pooled_transaction.h"
#include "storage/pg/prepared.h"

namespace metrics::storage::pg {

class PgReads : public ChartReads {
 public:
  // `where` ends the operation named in errors ("" or " on the standby").
  PgReads(ConnectionPool& pool, std::string where);

  // The statements the reads prepare: every connection of the pool must
  // have them (ConnectionPoolOptions).
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

  // The store's other reads: as MetricStore's methods of the same names.
  absl::StatusOr<Trial> GetTrial(int32_t id, absl::Time deadline);
  absl::StatusOr<StreamStart> GetStreamStart(int32_t trial_id,
                                             absl::string_view stream_id,
                                             absl::Time deadline);
  absl::StatusOr<std::vector<SeriesInfo>> ListSeriesOfEveryGroup(
      int32_t trial_id, absl::Time deadline);
  absl::StatusOr<LatestValues> LatestValuesOfActiveTrials(
      size_t limit, int64_t live_since_us, absl::Time deadline);
  absl::StatusOr<std::vector<AgentActivity>> AgentActivityOfTrials(
      const std::vector<int32_t>& trial_ids, absl::Time deadline);
  absl::StatusOr<std::vector<StoredInventory>> InventoriesOfTrial(
      int32_t trial_id, absl::Time deadline);
  absl::StatusOr<std::vector<Reading>> ReadReadings(int32_t trial_id,
                                                    const SeriesInfo& series,
                                                    ReadingCursor after,
                                                    size_t limit,
                                                    absl::Time deadline);

 private:
  // Runs `body` in a read transaction on the pool, `where_` naming it.
  template <typename T, typename Body>
  absl::StatusOr<T> Run(absl::string_view operation, absl::Time deadline,
                        Body body) {
    return Read<T>(pool_, absl::StrCat(operation, where_), deadline,
                   std::move(body));
  }

  ConnectionPool& pool_;
  const std::string where_;
};

}  // namespace metrics::storage::pg

#endif  // METRICS_STORAGE_PG_READS_PG_READS_H_
