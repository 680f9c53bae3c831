#include "storage/testing/fault_injecting_metric_store.h"

namespace metrics::storage::test_util {

void FaultInjectingMetricStore::FailNextSubmits(int n, absl::Status status) {
  absl::MutexLock lock(&mu_);
  fail_submits_ = n;
  fail_status_ = std::move(status);
}

void FaultInjectingMetricStore::HoldOutcomes() {
  absl::MutexLock lock(&mu_);
  hold_ = true;
}

void FaultInjectingMetricStore::ReleaseOutcomes() {
  std::vector<Held> held;
  {
    absl::MutexLock lock(&mu_);
    hold_ = false;
    held.swap(held_);
  }
  for (Held& h : held) std::move(h.done)(std::move(h.outcome));
}

int FaultInjectingMetricStore::submitted() const {
  absl::MutexLock lock(&mu_);
  return submitted_;
}

bool FaultInjectingMetricStore::AwaitSubmitted(int n, absl::Duration timeout) {
  absl::MutexLock lock(&mu_);
  struct Args {
    const int* submitted;
    int n;
  } args{&submitted_, n};
  return mu_.AwaitWithTimeout(
      absl::Condition(
          +[](Args* a) { return *a->submitted >= a->n; }, &args),
      timeout);
}

void FaultInjectingMetricStore::HoldStreamStarts() {
  absl::MutexLock lock(&mu_);
  hold_starts_ = true;
}

void FaultInjectingMetricStore::ReleaseStreamStarts() {
  absl::MutexLock lock(&mu_);
  hold_starts_ = false;
}

bool FaultInjectingMetricStore::AwaitHeldStreamStarts(int n,
                                                      absl::Duration timeout) {
  absl::MutexLock lock(&mu_);
  struct Args {
    const int* held;
    int n;
  } args{&held_starts_, n};
  return mu_.AwaitWithTimeout(
      absl::Condition(+[](Args* a) { return *a->held >= a->n; }, &args),
      timeout);
}

absl::StatusOr<StreamStart> FaultInjectingMetricStore::GetStreamStart(
    int32_t trial_id, absl::string_view stream_id, absl::Time deadline) {
  {
    absl::MutexLock lock(&mu_);
    ++held_starts_;
    mu_.Await(absl::Condition(
        +[](bool* hold) { return !*hold; }, &hold_starts_));
    --held_starts_;
  }
  return target()->GetStreamStart(trial_id, stream_id, deadline);
}

absl::Status FaultInjectingMetricStore::SubmitBatch(
    MetricBatch batch, absl::AnyInvocable<void(BatchOutcome) &&> done) {
  {
    absl::MutexLock lock(&mu_);
    if (fail_submits_ > 0) {
      --fail_submits_;
      return fail_status_;
    }
    ++submitted_;
  }
  return target()->SubmitBatch(
      std::move(batch),
      [this, done = std::move(done)](BatchOutcome outcome) mutable {
        {
          absl::MutexLock lock(&mu_);
          if (hold_) {
            held_.push_back({std::move(done), std::move(outcome)});
            return;
          }
        }
        std::move(done)(std::move(outcome));
      });
}

void FaultInjectingMetricStore::Shutdown(absl::Time deadline) {
  ReleaseOutcomes();
  ReleaseStreamStarts();
  target()->Shutdown(deadline);
}

}  // namespace metrics::storage::test_util
