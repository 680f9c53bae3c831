// A MetricStore that wraps a real one (never a fake) and lets a test inject
// faults: fail the next N submits with a given status, or hold back commit
// outcomes until released (to observe what happens while the database is
// slow). Everything else passes through.
//
// Thread-safety: thread-safe.
#ifndef METRICS_STORAGE_TESTING_FAULT_INJECTING_METRIC_STORE_H_
#define METRICS_STORAGE_TESTING_FAULT_INJECTING_METRIC_STORE_H_

#include <memory>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "storage/metric_store.h"

namespace metrics::storage::testing {

class FaultInjectingMetricStore : public MetricStore {
 public:
  explicit FaultInjectingMetricStore(std::unique_ptr<MetricStore> base)
      : base_(std::move(base)) {}

  // The next `n` SubmitBatch calls return `status` without queueing.
  void FailNextSubmits(int n, absl::Status status) ABSL_LOCKS_EXCLUDED(mu_);
  // While held, outcomes of committed batches are kept, not delivered.
  void HoldOutcomes() ABSL_LOCKS_EXCLUDED(mu_);
  // Delivers the kept outcomes (on this thread) and stops holding.
  void ReleaseOutcomes() ABSL_LOCKS_EXCLUDED(mu_);
  // Batches that reached the real store.
  int submitted() const ABSL_LOCKS_EXCLUDED(mu_);
  // Waits until `n` batches reached the real store; false on timeout.
  bool AwaitSubmitted(int n, absl::Duration timeout) ABSL_LOCKS_EXCLUDED(mu_);

  absl::StatusOr<Trial> CreateTrial(std::optional<int32_t> id,
                                    absl::Time deadline) override {
    return base_->CreateTrial(id, deadline);
  }
  absl::StatusOr<Trial> GetTrial(int32_t id, absl::Time deadline) override {
    return base_->GetTrial(id, deadline);
  }
  absl::StatusOr<std::vector<Trial>> ListTrials(
      const TrialListFilter& filter, absl::Time deadline) override {
    return base_->ListTrials(filter, deadline);
  }
  absl::StatusOr<Trial> SetTrialState(int32_t id, TrialState state,
                                      absl::Time deadline) override {
    return base_->SetTrialState(id, state, deadline);
  }
  absl::StatusOr<int64_t> GetStreamPosition(int32_t trial_id,
                                            absl::string_view stream_id,
                                            absl::Time deadline) override {
    return base_->GetStreamPosition(trial_id, stream_id, deadline);
  }
  absl::StatusOr<std::vector<SeriesInfo>> ListSeries(
      int32_t trial_id, bool extents, absl::Time deadline) override {
    return base_->ListSeries(trial_id, extents, deadline);
  }
  IngestStatistics GetIngestStatistics() const override {
    return base_->GetIngestStatistics();
  }
  absl::StatusOr<std::vector<LatestValue>> LatestValuesOfActiveTrials(
      size_t limit, absl::Time deadline) override {
    return base_->LatestValuesOfActiveTrials(limit, deadline);
  }
  absl::StatusOr<std::vector<SeriesInfo>> ListSeriesOfEveryGroup(
      int32_t trial_id, absl::Time deadline) override {
    return base_->ListSeriesOfEveryGroup(trial_id, deadline);
  }
  absl::StatusOr<std::vector<Reading>> ReadReadings(
      int32_t trial_id, const SeriesInfo& series, ReadingCursor after,
      size_t limit, absl::Time deadline) override {
    return base_->ReadReadings(trial_id, series, after, limit, deadline);
  }
  absl::StatusOr<std::vector<RollupRow>> ReadRollups(
      int32_t trial_id, const std::vector<std::string>& agents, int width_s,
      const std::vector<int64_t>& series_ids, int64_t from_us, int64_t to_us,
      absl::Time deadline) override {
    return base_->ReadRollups(trial_id, agents, width_s, series_ids, from_us,
                              to_us, deadline);
  }
  absl::StatusOr<std::vector<std::vector<Sample>>> ReadRawSamples(
      int32_t trial_id, const std::vector<SeriesInfo>& series, int64_t from_us,
      int64_t to_us, absl::Time deadline) override {
    return base_->ReadRawSamples(trial_id, series, from_us, to_us, deadline);
  }
  std::unique_ptr<ChangeSubscription> SubscribeToChanges(
      int32_t trial_id, std::function<void()> on_change) override {
    return base_->SubscribeToChanges(trial_id, std::move(on_change));
  }
  absl::Status SubmitBatch(SystemBatch batch,
                           absl::AnyInvocable<void(BatchOutcome) &&> done)
      override ABSL_LOCKS_EXCLUDED(mu_);
  void Shutdown(absl::Time deadline) override;

 private:
  struct Held {
    absl::AnyInvocable<void(BatchOutcome) &&> done;
    BatchOutcome outcome;
  };

  const std::unique_ptr<MetricStore> base_;
  mutable absl::Mutex mu_;
  int fail_submits_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Status fail_status_ ABSL_GUARDED_BY(mu_);
  bool hold_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<Held> held_ ABSL_GUARDED_BY(mu_);
  int submitted_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace metrics::storage::testing

#endif  // METRICS_STORAGE_TESTING_FAULT_INJECTING_METRIC_STORE_H_
