// PgMetricStore: the MetricStore on PostgreSQL. Blocking calls (trials,
// stream positions, reads) run on the calling thread with a connection
// leased from a bounded pool; batches go to the group-commit IngestWriter;
// change notifications come from one LISTEN connection (ChangeNotifier).
// With a standby (options.read), chart reads and trial lists go to a pool
// of its own while it is current (ReadReplica); FreshReads() reads them
// from the primary.
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
#include "storage/pg/read_replica.h"

namespace metrics::storage::pg {

// Reads from a hot standby (see ReadReplica): ListTrials, ListSeries,
// ReadRollups and ReadRawSamples go there while it is current enough.
struct ReadFromStandbyOptions {
  std::string database_url;  // "": every read on the primary
  absl::Duration max_lag = absl::Seconds(5);
  absl::Duration check_every = absl::Seconds(1);
  // A line for the log when reads move between the servers.
  std::function<void(const std::string&)> on_change;
};

struct PgMetricStoreOptions {
  std::string database_url;  // "" for the PG* variables
  // Connections for blocking calls (the writer's lanes have their own).
  int pool_size = 4;
  IngestWriterOptions writer;  // its database_url is set from the above
  IngestLimits limits;
  ReadFromStandbyOptions read;
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
  absl::StatusOr<StreamStart> GetStreamStart(int32_t trial_id,
                                             absl::string_view stream_id,
                                             absl::Time deadline) override;
  absl::StatusOr<std::vector<SeriesInfo>> ListSeries(
      int32_t trial_id, bool extents, absl::Time deadline) override;
  IngestStatistics GetIngestStatistics() const override {
    return writer_->Statistics();
  }
  ReadRoutingStatistics GetReadRoutingStatistics() const override;
  MetricStore* FreshReads() override;
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
  class PrimaryView;
  enum class ReadFrom { kStandbyIfCurrent, kPrimary };

  explicit PgMetricStore(PgMetricStoreOptions options);

  // Runs a read on the standby when `from` allows and the standby is
  // current, else (or when it fails there in a way the primary may not) on
  // the primary.
  template <typename T, typename Body>
  absl::StatusOr<T> Routed(ReadFrom from, absl::string_view operation,
                           absl::Time deadline, Body body);
  absl::StatusOr<std::vector<Trial>> ListTrialsFrom(
      ReadFrom from, const TrialListFilter& filter, absl::Time deadline);
  absl::StatusOr<std::vector<SeriesInfo>> ListSeriesFrom(ReadFrom from,
                                                         int32_t trial_id,
                                                         bool extents,
                                                         absl::Time deadline);
  absl::Status ReadRollupsFrom(ReadFrom from, int32_t trial_id,
                               const std::vector<std::string>& agents,
                               int width_s,
                               const std::vector<int64_t>& series_ids,
                               int64_t from_us, int64_t to_us,
                               absl::Time deadline, RollupSink& sink);
  absl::StatusOr<std::vector<std::vector<Sample>>> ReadRawSamplesFrom(
      ReadFrom from, int32_t trial_id, const std::vector<SeriesInfo>& series,
      int64_t from_us, int64_t to_us, int64_t max_reports,
      absl::Time deadline);

  const PgMetricStoreOptions options_;
  ConnectionPool pool_;
  ChangeNotifier notifier_;
  std::unique_ptr<IngestWriter> writer_;
  std::unique_ptr<ReadReplica> replica_;  // null without a standby
  std::unique_ptr<MetricStore> primary_view_;  // null without a standby
  absl::Mutex check_mu_;
  // CheckDatabase's; null until its first call and after a failure.
  std::unique_ptr<pqxx::connection> check_connection_ ABSL_GUARDED_BY(check_mu_);
};

}  // namespace metrics::storage::pg

#endif  // METRICS_STORAGE_PG_PG_METRIC_STORE_H_
