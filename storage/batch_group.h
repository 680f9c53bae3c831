// Submits several batches to a MetricStore and waits until every one has
// its outcome: what a caller that stores a request of many batches at once
// needs (the legacy post, the legacy move). A batch the store would not
// queue gets a kFailed outcome carrying the refusal, so each batch has
// exactly one outcome.
//
// Usage:
//   BatchGroup group(store, /*wait_for_room=*/false);
//   for (MetricBatch& b : batches) group.Submit(std::move(b), on_outcome);
//   group.Wait();
//
// Thread-safety: Submit and Wait are for one thread; `on_outcome` runs on a
// writer thread (or the submitting one), never two at once, and must not
// block.
#ifndef METRICS_STORAGE_BATCH_GROUP_H_
#define METRICS_STORAGE_BATCH_GROUP_H_

#include <functional>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "storage/metric_store.h"

namespace metrics::storage {

class BatchGroup {
 public:
  // `store` must outlive the group. With `wait_for_room`, a full queue is
  // waited out (the writer's back-pressure on a bulk load); without, it is
  // the batch's outcome.
  BatchGroup(MetricStore& store, bool wait_for_room)
      : store_(store), wait_for_room_(wait_for_room) {}
  // Waits for what is still pending.
  ~BatchGroup() { Wait(); }

  BatchGroup(const BatchGroup&) = delete;
  BatchGroup& operator=(const BatchGroup&) = delete;

  void Submit(MetricBatch batch,
              std::function<void(const BatchOutcome&)> on_outcome)
      ABSL_LOCKS_EXCLUDED(mu_);

  // Returns once every submitted batch has had its outcome.
  void Wait() ABSL_LOCKS_EXCLUDED(mu_);

 private:
  bool Idle() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return pending_ == 0; }

  MetricStore& store_;
  const bool wait_for_room_;
  absl::Mutex mu_;
  int pending_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace metrics::storage

#endif  // METRICS_STORAGE_BATCH_GROUP_H_
