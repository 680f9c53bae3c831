// PgMetricStore: the MetricStore on PostgreSQL. Blocking calls (trials,
// stream positions, reads) run on the calling thread with a connection
// leased from a bounded pool; the reads are those of reads/ (chart, trial,
// fleet and legacy reads). Batches go to the group-commit IngestWriter;
// change notifications come from one LISTEN connection (ChangeNotifier).
// With a standby (options.read), a second PgChartReads over the standby's
// pool answers the chart reads while it is current (RoutedReads,
// ReadReplica); PrimaryReads() are the primary's. Its parts live in the
// .cc, so including this header brings no libpqxx.
//
// Usage:
//   PgMetricStoreOptions options;
//   options.database_url = url;
//   std::unique_ptr<MetricStore> store = PgMetricStore::Create(options);
//
// Thread-safety: thread-safe.
#ifndef METRICS_STORAGE_PG_PG_METRIC_STORE_H_
#define METRICS_STORAGE_PG_PG_METRIC_STORE_H_

#include <memory>

#include "storage/metric_store.h"
#include "storage/pg/pg_metric_store_options.h"

namespace metrics::storage::pg {

class PgMetricStore : public MetricStore {
 public:
  // Connects nothing yet: connections open on first use.
  static std::unique_ptr<PgMetricStore> Create(PgMetricStoreOptions options);
  ~PgMetricStore() override;

  absl::StatusOr<Trial> CreateTrial(std::optional<int32_t> id,
                                    absl::Time deadline) override;
  absl::StatusOr<Trial> GetTrial(int32_t id, absl::Time deadline) override;
  absl::StatusOr<Trial> SetTrialState(int32_t id, TrialState state,
                                      absl::Time deadline) override;
  absl::StatusOr<Trial> BeginTrialRun(int32_t trial_id, int32_t run_id,
                                      absl::Time deadline) override;
  absl::StatusOr<GenericWrite> WriteGenericReport(const GenericReport& report,
                                                  absl::Time deadline) override;
  absl::StatusOr<std::vector<GenericRow>> ReadGenericReports(
      int32_t trial_id, absl::string_view group, int32_t after_batches,
      size_t limit, absl::Time deadline) override;
  absl::StatusOr<StreamStart> GetStreamStart(int32_t trial_id,
                                             absl::string_view stream_id,
                                             absl::Time deadline) override;
  IngestStatistics GetIngestStatistics() const override;
  ReadRoutingStatistics GetReadRoutingStatistics() const override;
  ChartReads& Reads() override;
  ChartReads& PrimaryReads() override;
  absl::StatusOr<LatestValues> LatestValuesOfActiveTrials(
      size_t limit, int64_t live_since_us, absl::Time deadline) override;
  absl::StatusOr<std::vector<AgentActivity>> AgentActivityOfTrials(
      const std::vector<int32_t>& trial_ids, absl::Time deadline) override;
  absl::StatusOr<std::vector<StoredInventory>> InventoriesOfTrial(
      int32_t trial_id, absl::Time deadline) override;
  absl::StatusOr<std::vector<SeriesInfo>> ListSeriesOfEveryGroup(
      int32_t trial_id, absl::Time deadline) override;
  absl::StatusOr<std::vector<Reading>> ReadReadings(
      int32_t trial_id, const SeriesInfo& series, ReadingCursor after,
      size_t limit, absl::Time deadline) override;
  std::unique_ptr<ChangeSubscription> SubscribeToChanges(
      int32_t trial_id, std::vector<std::string> agent_ids,
      std::function<void()> on_change) override;
  absl::Status SubmitBatch(
      MetricBatch batch,
      absl::AnyInvocable<void(BatchOutcome) &&> done) override;
  absl::Status CheckDatabase() override;
  DatabaseServerState GetDatabaseServerState() const override;
  void Shutdown(absl::Time deadline) override;

  size_t queued_values() const;

 private:
  explicit PgMetricStore(PgMetricStoreOptions options);

  struct Parts;

  const PgMetricStoreOptions options_;
  const std::unique_ptr<Parts> parts_;
};

}  // namespace metrics::storage::pg

#endif  // METRICS_STORAGE_PG_PG_METRIC_STORE_H_
