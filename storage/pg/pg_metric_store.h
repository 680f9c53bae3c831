// PgMetricStore: the MetricStore on PostgreSQL. Blocking calls (trials,
// stream positions, reads) run on the calling thread with a connection
// leased from a bounded pool; batches go to the group-commit IngestWriter;
// change notifications come from one LISTEN connection (ChangeNotifier).
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

#include <functional>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "storage/batch_validation.h"
#include "storage/metric_store.h"
#include "storage/pg/change_notifier.h"
#include "storage/pg/connection_pool.h"
#include "storage/pg/ingest_writer.h"

namespace metrics::storage::pg {

struct PgMetricStoreOptions {
  std::string database_url;  // "" for the PG* variables
  // Connections for blocking calls (the writer's lanes have their own).
  int pool_size = 4;
  IngestWriterOptions writer;  // its database_url is set from the above
  IngestLimits limits;
  // "Now", for the future-time check of reports.
  std::function<absl::Time()> clock = [] { return absl::Now(); };
};

class PgMetricStore : public MetricStore {
 public:
  // Connects nothing yet: connections open on first use.
  static std::unique_ptr<PgMetricStore> Create(PgMetricStoreOptions options);
  ~PgMetricStore() override;

  absl::StatusOr<Trial> CreateTrial(std::optional<int32_t> id,
                                    absl::Time deadline) override;
  absl::StatusOr<Trial> GetTrial(int32_t id, absl::Time deadline) override;
  absl::StatusOr<std::vector<Trial>> ListTrials(const TrialListFilter& filter,
                                                absl::Time deadline) override;
  absl::StatusOr<Trial> SetTrialState(int32_t id, TrialState state,
                                      absl::Time deadline) override;
  absl::StatusOr<int64_t> GetStreamPosition(int32_t trial_id,
                                            absl::string_view stream_id,
                                            absl::Time deadline) override;
  absl::StatusOr<std::vector<SeriesInfo>> ListSeries(
      int32_t trial_id, bool extents, absl::Time deadline) override;
  IngestStatistics GetIngestStatistics() const override {
    return writer_->Statistics();
  }
  absl::StatusOr<std::vector<LatestValue>> LatestValuesOfActiveTrials(
      size_t limit, absl::Time deadline) override;
  absl::StatusOr<std::vector<AgentActivity>> AgentActivityOfTrials(
      const std::vector<int32_t>& trial_ids, absl::Time deadline) override;
  absl::StatusOr<std::vector<SeriesInfo>> ListSeriesOfEveryGroup(
      int32_t trial_id, absl::Time deadline) override;
  absl::StatusOr<std::vector<Reading>> ReadReadings(
      int32_t trial_id, const SeriesInfo& series, ReadingCursor after,
      size_t limit, absl::Time deadline) override;
  absl::Status ReadRollups(int32_t trial_id,
                           const std::vector<std::string>& agents, int width_s,
                           const std::vector<int64_t>& series_ids,
                           int64_t from_us, int64_t to_us, absl::Time deadline,
                           RollupSink& sink) override;
  absl::StatusOr<std::vector<std::vector<Sample>>> ReadRawSamples(
      int32_t trial_id, const std::vector<SeriesInfo>& series, int64_t from_us,
      int64_t to_us, int64_t max_reports, absl::Time deadline) override;
  std::unique_ptr<ChangeSubscription> SubscribeToChanges(
      int32_t trial_id, std::function<void()> on_change) override;
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
  ChangeNotifier notifier_;
  std::unique_ptr<IngestWriter> writer_;
  absl::Mutex check_mu_;
  // CheckDatabase's; null until its first call and after a failure.
  std::unique_ptr<pqxx::connection> check_connection_ ABSL_GUARDED_BY(check_mu_);
};

}  // namespace metrics::storage::pg

#endif  // METRICS_STORAGE_PG_PG_METRIC_STORE_H_
