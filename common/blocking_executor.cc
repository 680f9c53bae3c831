#include "common/blocking_executor.h"

#include <memory>

namespace metrics::common {

BlockingExecutor::BlockingExecutor(int threads, size_t max_queued)
    : max_queued_(max_queued) {
  for (int i = 0; i < threads; ++i) threads_.emplace_back([this] { Loop(); });
}

BlockingExecutor::~BlockingExecutor() { Shutdown(); }

bool BlockingExecutor::Post(absl::AnyInvocable<void() &&> work) {
  absl::MutexLock lock(&mu_);
  if (stopping_ || queue_.size() >= max_queued_) return false;
  queue_.push_back(std::move(work));
  return true;
}

void BlockingExecutor::RunAlongside(absl::FunctionRef<void()> here,
                                    absl::FunctionRef<void()> there) {
  // Whoever takes `there` first runs it. It refers to the caller's frame:
  // a pool thread that finds it taken returns without touching it, and a
  // caller that finds it taken waits until it has run.
  struct Turn {
    absl::Mutex mu;
    bool taken ABSL_GUARDED_BY(mu) = false;
    bool done ABSL_GUARDED_BY(mu) = false;
  };
  auto turn = std::make_shared<Turn>();
  Post([turn, there] {
    {
      absl::MutexLock lock(&turn->mu);
      if (turn->taken) return;
      turn->taken = true;
    }
    there();
    absl::MutexLock lock(&turn->mu);
    turn->done = true;
  });
  here();
  {
    absl::MutexLock lock(&turn->mu);
    if (turn->taken) {
      turn->mu.Await(absl::Condition(&turn->done));
      return;
    }
    turn->taken = true;
  }
  there();
}

void BlockingExecutor::Shutdown() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  for (std::thread& t : threads_) {
    if (t.joinable()) t.join();
  }
}

void BlockingExecutor::Loop() {
  while (true) {
    absl::AnyInvocable<void() &&> work;
    {
      absl::MutexLock lock(&mu_);
      mu_.Await(absl::Condition(this, &BlockingExecutor::HasWorkOrStopping));
      if (queue_.empty()) return;  // stopping and drained
      work = std::move(queue_.front());
      queue_.pop_front();
    }
    std::move(work)();
  }
}

}  // namespace metrics::common
