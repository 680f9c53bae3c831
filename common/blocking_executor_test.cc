// RunAlongside: the second half runs on a pool thread while the caller runs
// the first when a thread is free, and on the caller when none is or the
// queue is full; both have run when it returns.

#include "common/blocking_executor.h"

#include <atomic>
#include <thread>

#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"

namespace metrics::common {
namespace {

TEST(BlockingExecutorTest, RunAlongsideRunsTheSecondHalfOnAFreeThreadMeanwhile) {
  BlockingExecutor pool(1, 1);
  const std::thread::id caller = std::this_thread::get_id();
  absl::Notification there_started;
  std::thread::id there_ran_on;
  bool here_saw_there_running = false;
  pool.RunAlongside(
      // `here` waits for `there`: only running both at once ends this.
      [&] { here_saw_there_running = there_started.WaitForNotificationWithTimeout(absl::Seconds(30)); },
      [&] {
        there_ran_on = std::this_thread::get_id();
        there_started.Notify();
      });
  EXPECT_TRUE(here_saw_there_running);
  EXPECT_NE(there_ran_on, caller);
}

TEST(BlockingExecutorTest, RunAlongsideRunsBothOnTheCallerWhenThePoolIsBusy) {
  BlockingExecutor pool(1, 1);
  absl::Notification release;
  absl::Notification blocking;
  ASSERT_TRUE(pool.Post([&] {
    blocking.Notify();
    release.WaitForNotification();
  }));
  blocking.WaitForNotification();
  const std::thread::id caller = std::this_thread::get_id();
  std::thread::id here_ran_on, there_ran_on;
  std::atomic<int> order{0};
  int here_turn = 0, there_turn = 0;
  pool.RunAlongside([&] { here_ran_on = std::this_thread::get_id(); here_turn = ++order; },
                    [&] { there_ran_on = std::this_thread::get_id(); there_turn = ++order; });
  EXPECT_EQ(here_ran_on, caller);
  EXPECT_EQ(there_ran_on, caller);
  EXPECT_EQ(here_turn, 1);
  EXPECT_EQ(there_turn, 2);
  release.Notify();
}

TEST(BlockingExecutorTest, RunAlongsideRunsBothOnTheCallerWhenTheQueueRefuses) {
  BlockingExecutor pool(1, 0);  // Post refuses everything
  const std::thread::id caller = std::this_thread::get_id();
  std::thread::id there_ran_on;
  bool here_ran = false;
  pool.RunAlongside([&] { here_ran = true; },
                    [&] { there_ran_on = std::this_thread::get_id(); });
  EXPECT_TRUE(here_ran);
  EXPECT_EQ(there_ran_on, caller);
}

}  // namespace
}  // namespace metrics::common
