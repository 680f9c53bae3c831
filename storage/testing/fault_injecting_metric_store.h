// A MetricStore that wraps a real one (never a fake) and lets a test inject
// faults: fail the next N submits with a given status, hold back commit
// outcomes until released, or hold stream openings (GetStreamStart) until
// released (to observe what happens while the database is slow).
// Everything else passes through (MetricStoreWrapper).
//
// Thread-safety: thread-safe.
#ifndef METRICS_STORAGE_TESTING_FAULT_INJECTING_METRIC_STORE_H_
#define METRICS_STORAGE_TESTING_FAULT_INJECTING_METRIC_STORE_H_

#include <memory>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "storage/metric_store_wrapper.h"

namespace metrics::storage::test_util {

class FaultInjectingMetricStore : public MetricStoreWrapper {
 public:
  explicit FaultInjectingMetricStore(std::unique_ptr<MetricStore> base)
      : MetricStoreWrapper(std::move(base)) {}

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
  // While held, GetStreamStart blocks its caller before reading.
  void HoldStreamStarts() ABSL_LOCKS_EXCLUDED(mu_);
  void ReleaseStreamStarts() ABSL_LOCKS_EXCLUDED(mu_);
  // Waits until `n` GetStreamStart calls are blocked; false on timeout.
  bool AwaitHeldStreamStarts(int n, absl::Duration timeout)
      ABSL_LOCKS_EXCLUDED(mu_);

  absl::StatusOr<StreamStart> GetStreamStart(int32_t trial_id,
                                             absl::string_view stream_id,
                                             absl::Time deadline) override
      ABSL_LOCKS_EXCLUDED(mu_);

  absl::Status SubmitBatch(MetricBatch batch,
                           absl::AnyInvocable<void(BatchOutcome) &&> done)
      override ABSL_LOCKS_EXCLUDED(mu_);
  void Shutdown(absl::Time deadline) override;

 private:
  struct Held {
    absl::AnyInvocable<void(BatchOutcome) &&> done;
    BatchOutcome outcome;
  };

  mutable absl::Mutex mu_;
  int fail_submits_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Status fail_status_ ABSL_GUARDED_BY(mu_);
  bool hold_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<Held> held_ ABSL_GUARDED_BY(mu_);
  int submitted_ ABSL_GUARDED_BY(mu_) = 0;
  bool hold_starts_ ABSL_GUARDED_BY(mu_) = false;
  int held_starts_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace metrics::storage::test_util

#endif  // METRICS_STORAGE_TESTING_FAULT_INJECTING_METRIC_STORE_H_
