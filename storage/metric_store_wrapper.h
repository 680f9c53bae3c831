// A MetricStore that forwards every call to another one (leveldb's
// EnvWrapper is the model): derive from it and override only what you
// change, as the fault-injecting store does. A method added to MetricStore
// is forwarded here once, not in every wrapper.
//
// Thread-safety: as the wrapped store.
#ifndef METRICS_STORAGE_METRIC_STORE_WRAPPER_H_
#define METRICS_STORAGE_METRIC_STORE_WRAPPER_H_

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "storage/metric_store.h"

namespace metrics::storage {

class MetricStoreWrapper : public MetricStore {
 public:
  explicit MetricStoreWrapper(std::unique_ptr<MetricStore> target)
      : owned_(std::move(target)), target_(owned_.get()) {}
  // Wraps a store that outlives the wrapper.
  explicit MetricStoreWrapper(MetricStore* target) : target_(target) {}

  MetricStore* target() const { return target_; }

  absl::StatusOr<Trial> CreateTrial(std::optional<int32_t> id,
                                    absl::Time deadline) override {
    return target_->CreateTrial(id, deadline);
  }
  absl::StatusOr<Trial> GetTrial(int32_t id, absl::Time deadline) override {
    return target_->GetTrial(id, deadline);
  }
  absl::StatusOr<Trial> SetTrialState(int32_t id, TrialState state,
                                      absl::Time deadline) override {
    return target_->SetTrialState(id, state, deadline);
  }
  absl::StatusOr<StreamStart> GetStreamStart(int32_t trial_id,
                                             absl::string_view stream_id,
                                             absl::Time deadline) override {
    return target_->GetStreamStart(trial_id, stream_id, deadline);
  }
  absl::StatusOr<Trial> BeginTrialRun(int32_t trial_id, int32_t run_id,
                                      absl::Time deadline) override {
    return target_->BeginTrialRun(trial_id, run_id, deadline);
  }
  absl::StatusOr<GenericWrite> WriteGenericReport(const GenericReport& report,
                                                  absl::Time deadline) override {
    return target_->WriteGenericReport(report, deadline);
  }
  absl::StatusOr<std::vector<GenericRow>> ReadGenericReports(
      int32_t trial_id, absl::string_view group, int32_t after_batches,
      size_t limit, absl::Time deadline) override {
    return target_->ReadGenericReports(trial_id, group, after_batches, limit,
                                       deadline);
  }
  absl::StatusOr<std::vector<SeriesInfo>> ListSeriesOfEveryGroup(
      int32_t trial_id, absl::Time deadline) override {
    return target_->ListSeriesOfEveryGroup(trial_id, deadline);
  }
  absl::StatusOr<std::vector<Reading>> ReadReadings(
      int32_t trial_id, const SeriesInfo& series, ReadingCursor after,
      size_t limit, absl::Time deadline) override {
    return target_->ReadReadings(trial_id, series, after, limit, deadline);
  }
  std::unique_ptr<ChangeSubscription> SubscribeToChanges(
      int32_t trial_id, std::vector<std::string> agent_ids,
      std::function<void()> on_change) override {
    return target_->SubscribeToChanges(trial_id, std::move(agent_ids),
                                       std::move(on_change));
  }
  absl::Status SubmitBatch(
      MetricBatch batch,
      absl::AnyInvocable<void(BatchOutcome) &&> done) override {
    return target_->SubmitBatch(std::move(batch), std::move(done));
  }
  IngestStatistics GetIngestStatistics() const override {
    return target_->GetIngestStatistics();
  }
  ReadRoutingStatistics GetReadRoutingStatistics() const override {
    return target_->GetReadRoutingStatistics();
  }
  absl::StatusOr<LatestValues> LatestValuesOfActiveTrials(
      size_t limit, int64_t live_since_us, absl::Time deadline) override {
    return target_->LatestValuesOfActiveTrials(limit, live_since_us, deadline);
  }
  absl::StatusOr<std::vector<AgentActivity>> AgentActivityOfTrials(
      const std::vector<int32_t>& trial_ids, absl::Time deadline) override {
    return target_->AgentActivityOfTrials(trial_ids, deadline);
  }
  absl::StatusOr<std::vector<StoredInventory>> InventoriesOfTrial(
      int32_t trial_id, absl::Time deadline) override {
    return target_->InventoriesOfTrial(trial_id, deadline);
  }
  // Itself rather than the target's view, so that follow still passes
  // through the wrapper (wrappers are for tests, without a standby).
  ChartReads& Reads() override { return target_->Reads(); }
  ChartReads& PrimaryReads() override { return target_->PrimaryReads(); }
  absl::Status CheckDatabase() override { return target_->CheckDatabase(); }
  DatabaseServerState GetDatabaseServerState() const override {
    return target_->GetDatabaseServerState();
  }
  void Shutdown(absl::Time deadline) override { target_->Shutdown(deadline); }

 private:
  const std::unique_ptr<MetricStore> owned_;  // null if not owned
  MetricStore* const target_;
};

}  // namespace metrics::storage

#endif  // METRICS_STORAGE_METRIC_STORE_WRAPPER_H_
