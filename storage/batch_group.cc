#include "storage/batch_group.h"

#include <utility>

#include "absl/time/clock.h"

namespace metrics::storage {

void BatchGroup::Submit(MetricBatch batch,
                        std::function<void(const BatchOutcome&)> on_outcome) {
  {
    absl::MutexLock lock(&mu_);
    ++pending_;
  }
  auto done = [this, on_outcome](BatchOutcome outcome) {
    absl::MutexLock lock(&mu_);
    on_outcome(outcome);
    --pending_;
  };
  absl::Status queued;
  if (!wait_for_room_) {
    queued = store_.SubmitBatch(std::move(batch), done);
  } else {
    // The store keeps no batch it refuses, so each try gets a copy.
    while ((queued = store_.SubmitBatch(batch, done)).code() ==
           absl::StatusCode::kResourceExhausted) {
      absl::SleepFor(absl::Milliseconds(20));
    }
  }
  if (!queued.ok()) {
    BatchOutcome refused;
    refused.kind = BatchOutcome::Kind::kFailed;
    refused.status = std::move(queued);
    done(std::move(refused));
  }
}

void BatchGroup::Wait() {
  absl::MutexLock lock(&mu_);
  mu_.Await(absl::Condition(this, &BatchGroup::Idle));
}

}  // namespace metrics::storage
