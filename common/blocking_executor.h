// A fixed pool of threads for blocking work (calls into the store from
// unary RPCs, HTTP handlers), so gRPC's callback threads and the HTTP
// server's io threads never block (gRFC L67). The queue
// is bounded: Post refuses work rather than let it pile up. RunAlongside
// lends a thread to one call's second half of a read, when one is free.
//
// Thread-safety: thread-safe.
#ifndef METRICS_COMMON_BLOCKING_EXECUTOR_H_
#define METRICS_COMMON_BLOCKING_EXECUTOR_H_

#include <deque>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/functional/any_invocable.h"
#include "absl/functional/function_ref.h"
#include "absl/synchronization/mutex.h"

namespace metrics::common {

class BlockingExecutor {
 public:
  BlockingExecutor(int threads, size_t max_queued);
  // Runs what is queued, then joins.
  ~BlockingExecutor();

  // Queues `work`; false (and `work` dropped) when the queue is full or the
  // executor is stopping.
  bool Post(absl::AnyInvocable<void() &&> work) ABSL_LOCKS_EXCLUDED(mu_);

  // Runs `here` on the calling thread and, meanwhile, `there` on a thread
  // of the pool; `there` runs on the caller after `here` instead when the
  // queue is full or no thread has taken it by then (so it never waits on
  // a busy pool, and a pool thread may call it). Returns once both ran.
  void RunAlongside(absl::FunctionRef<void()> here, absl::FunctionRef<void()> there)
      ABSL_LOCKS_EXCLUDED(mu_);

  // Stops taking work, runs what is queued, joins the threads. Idempotent.
  void Shutdown() ABSL_LOCKS_EXCLUDED(mu_);

 private:
  void Loop();
  bool HasWorkOrStopping() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return !queue_.empty() || stopping_;
  }

  const size_t max_queued_;
  absl::Mutex mu_;
  std::deque<absl::AnyInvocable<void() &&>> queue_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<std::thread> threads_;
};

}  // namespace metrics::common

#endif  // METRICS_COMMON_BLOCKING_EXECUTOR_H_
