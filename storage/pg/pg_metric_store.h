// PgMetricStore: the MetricStore on PostgreSQL. Blocking calls (trials,
// stream positions, reads) run on the calling thread with a connection
// leased from a bounded pool; the reads are PgReads'. Batches go to the
// group-commit IngestWriter; change notifications come from one LISTEN
// connection (ChangeNotifier). With a standby (options.read), a second
// PgReads over the standby's pool answers the chart reads while it is
// current (RoutedReads, ReadReplica); PrimaryReads() are the primary's.
//
// Usage:
//   PgMetricStoreOptions options;
//   options.database_url = url;
//   std::unique_ptr<MetricStore> store = PgMetricStore::Create(options);
//
// Thread-safety: thread-safe.
#ifndef METRICS_STORAGE_PG_PG_METRIC_STORE_H_
#define METRICS_STORAGE_PG_PG_METRIC_STORE_H_

#include <pqxx/connection>

#include <memory>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "storage/metric_store.h"
#include "storage/pg/change_notifier.h"
#include "storage/pg/connection_pool.h"
#include "storage/pg/ingest/ingest_writer.h"
#include "storage/pg/pg_metric_store_options.h"
#include "storage/pg/reads/read_replica.h"
#include "storage/pg/reads/pg_reads.h"
#include "storage/pg/reads/routed_reads.h"

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
  IngestStatistics GetIngestStatistics() const override {
    return writer_->Statistics();
  }
  ReadRoutingStatistics GetReadRoutingStatistics() const override;
  ChartReads& Reads() override;
  ChartReads& PrimaryReads() override { return reads_; }
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
  absl::Status CheckDatabase() override ABSL_LOCKS_EXCLUDED(check_mu_);
  void Shutdown(absl::Time deadline) override;

  size_t queued_values() const { return writer_->queued_values(); }

 private:
  explicit PgMetricStore(PgMetricStoreOptions options);

  const PgMetricStoreOptions options_;
  ConnectionPool pool_;
  PgReads reads_;  // over pool_: the primary
  ChangeNotifier notifier_;
  std::unique_ptr<IngestWriter> writer_;
  // Null without a standby.
  std::unique_ptr<ReadReplica> replica_;
  std::unique_ptr<PgReads> standby_reads_;  // over replica_->pool()
  std::unique_ptr<RoutedReads> routed_reads_;
  absl::Mutex check_mu_;
  // CheckDatabase's; null until its first call and after a failure.
  std::unique_ptr<pqxx::connection> check_connection_ ABSL_GUARDED_BY(check_mu_);
};

}  // namespace metrics::storage::pg

#endif  // METRICS_STORAGE_PG_PG_METRIC_STORE_H_
