// ReadinessProbe: a check that fails or hangs makes the server not ready
// within its bounds, and ready again once the database answers.
#include "server/readiness.h"

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <string>
#include <vector>

#include "absl/time/clock.h"
#include "common/testing/eventually.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "storage/metric_store_wrapper.h"
#include "storage/pg/pg_metric_store.h"

namespace metrics::server {
namespace {

// The real store (never asked here), whose check the test decides: it
// answers OK, fails, or hangs until let go. std::mutex, not absl's: the
// sanitizer builds' Abseil is not instrumented.
class ScriptedCheckStore : public storage::MetricStoreWrapper {
 public:
  enum class Answer { kOk, kFail, kHang };

  ScriptedCheckStore()
      : MetricStoreWrapper(storage::pg::PgMetricStore::Create({})) {}

  void Set(Answer answer) {
    std::lock_guard<std::mutex> lock(mu_);
    answer_ = answer;
    changed_.notify_all();
  }

  absl::Status CheckDatabase() override {
    std::unique_lock<std::mutex> lock(mu_);
    changed_.wait(lock, [&] { return answer_ != Answer::kHang; });
    return answer_ == Answer::kOk
               ? absl::OkStatus()
               : absl::UnavailableError("connection refused");
  }

 private:
  std::mutex mu_;
  std::condition_variable changed_;
  Answer answer_ = Answer::kOk;
};

bool Await(const ReadinessProbe& probe, bool ready) {
  return test_util::Eventually([&] { return probe.Ready() == ready; },
                               absl::Seconds(5), absl::Milliseconds(10));
}

TEST(ReadinessProbeTest, FollowsFailingAndHangingChecks) {
  ScriptedCheckStore store;
  std::mutex mu;
  std::vector<std::string> changes;
  ReadinessOptions options;
  options.interval = absl::Milliseconds(20);
  options.stale_after = absl::Milliseconds(300);
  // Waits until `n` changes were reported.
  auto reported = [&](size_t n) {
    return test_util::Eventually(
        [&] {
          std::lock_guard<std::mutex> lock(mu);
          return changes.size() >= n;
        },
        absl::Seconds(5), absl::Milliseconds(10));
  };
  ReadinessProbe probe(&store, options,
                       [&](bool ready, const std::string& reason) {
                         std::lock_guard<std::mutex> lock(mu);
                         changes.push_back(ready ? "ready" : "not ready: " + reason);
                       });
  EXPECT_TRUE(probe.Ready());

  store.Set(ScriptedCheckStore::Answer::kFail);
  ASSERT_TRUE(Await(probe, false));
  std::string reason;
  EXPECT_FALSE(probe.Ready(&reason));
  EXPECT_EQ(reason, "connection refused");
  ASSERT_TRUE(reported(1));
  store.Set(ScriptedCheckStore::Answer::kOk);
  ASSERT_TRUE(Await(probe, true));
  ASSERT_TRUE(reported(2));

  // A check that never answers: not ready once the last answer is stale.
  store.Set(ScriptedCheckStore::Answer::kHang);
  const absl::Time hung = absl::Now();
  ASSERT_TRUE(Await(probe, false));
  EXPECT_GE(absl::Now() - hung, absl::Milliseconds(250));
  EXPECT_FALSE(probe.Ready(&reason));
  EXPECT_EQ(reason, "the database does not answer");
  ASSERT_TRUE(reported(3));  // by the watcher: the checker is stuck
  store.Set(ScriptedCheckStore::Answer::kOk);
  ASSERT_TRUE(Await(probe, true));
  ASSERT_TRUE(reported(4));

  std::lock_guard<std::mutex> lock(mu);
  EXPECT_THAT(changes, ::testing::ElementsAre(
                           "not ready: connection refused", "ready",
                           "not ready: the database does not answer", "ready"));
}

}  // namespace
}  // namespace metrics::server
