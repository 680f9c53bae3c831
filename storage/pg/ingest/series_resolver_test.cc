// The series registry under concurrent writers, through PgMetricStore on a
// real PostgreSQL: the per-trial series limit stays exact when lanes and
// metricsd instances register at once (and when another writer's count
// lands between a transaction's check and its commit), and a group of many
// new agents gets its ids in declaration order with units checked across
// the group.
#include <pqxx/connection>
#include <pqxx/nontransaction>
#include <pqxx/result>
#include <pqxx/transaction>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <map>
#include <thread>

#include "absl/strings/str_cat.h"
#include "common/testing/eventually.h"
#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "storage/pg/pg_metric_store.h"
#include "storage/pg/testing/store_test.h"

namespace metrics::storage::pg {
namespace {

using ::metrics::test_util::StatusIs;
namespace test_util = ::metrics::storage::pg::test_util;
using test_util::kT0;


// absl::Notification's way, on std::mutex: ThreadSanitizer sees through
// the standard library's locks, not through Debian's uninstrumented Abseil.
class Done {
 public:
  void Notify() {
    std::lock_guard<std::mutex> lock(mu_);
    done_ = true;
    cv_.notify_all();
  }
  bool WaitForNotificationWithTimeout(absl::Duration timeout) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, absl::ToChronoMilliseconds(timeout),
                        [this] { return done_; });
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
};

class SeriesResolverTest : public test_util::StoreTest {
 protected:
  // Each test opens the stores it needs.
  void SetUp() override { EmptyTables(); }

  static std::unique_ptr<PgMetricStore> NewStore(int max_series, int lanes) {
    PgMetricStoreOptions options;
    options.limits.max_series_per_trial = max_series;
    options.writer.lanes = lanes;
    return StoreTest::NewStore(std::move(options));
  }

  // Waits until a writer lane of any store of this test's database waits
  // for a row lock.
  static void AwaitWriterBlocked() {
    ASSERT_TRUE(::metrics::test_util::Eventually(
        [] {
          return Scalar("SELECT count(*) FROM pg_stat_activity WHERE "
                        "application_name LIKE 'metricsd-writer-%' AND "
                        "wait_event_type = 'Lock' AND datname = current_database()") != "0";
        },
        absl::Seconds(30), absl::Milliseconds(50)))
        << "no writer lane waited for the lock";
  }

  // An agent's batch declaring `series` new series (cpu, then GPUs).
  static MetricBatch Batch(int32_t trial, absl::string_view agent,
                           int64_t sequence, int series) {
    MetricBatch batch;
    batch.stream_id = absl::StrCat(agent, "/s");
    batch.sequence = sequence;
    batch.trial_id = trial;
    batch.agent_id = std::string(agent);
    Report report;
    report.time_us = absl::ToUnixMicros(kT0 + absl::Seconds(sequence));
    for (int i = 0; i < series; ++i) {
      batch.series.push_back(
          {i == 0 ? "cpu_util_simple" : "gpu_util",
           i == 0 ? "" : absl::StrCat("GPU-", 10 - i), "percent"});
      report.series.push_back(static_cast<uint32_t>(i));
      report.values.push_back(i);
    }
    batch.reports.push_back(report);
    return batch;
  }

  // Submits without waiting; the outcome lands in `*out`, then `*done`.
  static void SubmitAsync(MetricStore& store, MetricBatch batch,
                          BatchOutcome* out, Done* done) {
    ASSERT_OK(store.SubmitBatch(std::move(batch), [out, done](BatchOutcome o) {
      *out = std::move(o);
      done->Notify();
    }));
  }
  static BatchOutcome Submit(MetricStore& store, MetricBatch batch) {
    BatchOutcome outcome;
    Done done;
    SubmitAsync(store, std::move(batch), &outcome, &done);
    EXPECT_TRUE(done.WaitForNotificationWithTimeout(absl::Seconds(60)));
    return outcome;
  }
};

TEST_F(SeriesResolverTest, ACountLandingBeforeTheCommitIsNotOvershot) {
  std::unique_ptr<PgMetricStore> store = NewStore(4, 1);
  ASSERT_OK(store->CreateTrial(7, Deadline()));
  Exec("INSERT INTO trial_series_counts VALUES (7, 0)");
  // Another writer holds the trial's counter: this store reads it (0, room
  // for 3 more) without waiting, and waits only to add its 3 at the end.
  pqxx::connection other(url());
  pqxx::work other_tx(other);
  other_tx.exec("SELECT 1 FROM trial_series_counts WHERE trial_id = 7 "
                "FOR UPDATE");
  BatchOutcome outcome;
  Done done;
  SubmitAsync(*store, Batch(7, "agent-a", 1, 3), &outcome, &done);
  AwaitWriterBlocked();
  // The other writer registers 2 series (its rows are not needed here) and
  // commits: 2 + 3 would pass the limit of 4.
  other_tx.exec("UPDATE trial_series_counts SET series_count = 2 "
                "WHERE trial_id = 7");
  other_tx.commit();
  ASSERT_TRUE(done.WaitForNotificationWithTimeout(absl::Seconds(60)));
  EXPECT_EQ(outcome.kind, BatchOutcome::Kind::kRejected);
  EXPECT_THAT(outcome.status,
              StatusIs(absl::StatusCode::kResourceExhausted,
                       "batch.series: trial 7 has 2 series and this batch "
                       "adds 3; the limit per trial is 4"));
  EXPECT_EQ(Scalar("SELECT series_count FROM trial_series_counts"), "2");
  EXPECT_EQ(Scalar("SELECT count(*) FROM series"), "0");
  EXPECT_EQ(Scalar("SELECT count(*) FROM metrics"), "0");
  // Its sequence number is used; a batch that fits is stored.
  BatchOutcome next = Submit(*store, Batch(7, "agent-a", 2, 2));
  EXPECT_EQ(next.kind, BatchOutcome::Kind::kStored) << next.status;
  EXPECT_EQ(Scalar("SELECT series_count FROM trial_series_counts"), "4");
  store->Shutdown(absl::Now() + absl::Seconds(10));
}

TEST_F(SeriesResolverTest, ManyAgentsOfTwoServersFillTheLimitExactly) {
  // Two stores (as two metricsd) of two lanes each; 48 new agents of 3
  // series at once into a trial with room for 25 of them and 2 series.
  constexpr int kAgents = 48, kSeries = 3, kLimit = 25 * kSeries + 2;
  std::unique_ptr<PgMetricStore> a = NewStore(kLimit, 2);
  std::unique_ptr<PgMetricStore> b = NewStore(kLimit, 2);
  ASSERT_OK(a->CreateTrial(5, Deadline()));
  std::vector<BatchOutcome> outcomes(kAgents);
  std::vector<Done> done(kAgents);
  for (int i = 0; i < kAgents; ++i) {
    SubmitAsync(i % 2 == 0 ? *a : *b,
                Batch(5, absl::StrCat("agent-", i), 1, kSeries), &outcomes[i],
                &done[i]);
  }
  int stored = 0;
  for (int i = 0; i < kAgents; ++i) {
    ASSERT_TRUE(done[i].WaitForNotificationWithTimeout(absl::Seconds(60)));
    if (outcomes[i].kind == BatchOutcome::Kind::kStored) {
      ++stored;
      continue;
    }
    EXPECT_EQ(outcomes[i].kind, BatchOutcome::Kind::kRejected);
    EXPECT_THAT(outcomes[i].status,
                StatusIs(absl::StatusCode::kResourceExhausted,
                         ::testing::HasSubstr("the limit per trial is 77")));
  }
  EXPECT_EQ(stored, 25);
  EXPECT_EQ(Scalar("SELECT count(*) FROM series"), "75");
  EXPECT_EQ(Scalar("SELECT series_count FROM trial_series_counts"), "75");
  EXPECT_EQ(Scalar("SELECT count(*) FROM metrics"), "25");
  // The stored agents go on with the ids they got, through either server.
  for (int i = 0; i < kAgents; ++i) {
    if (outcomes[i].kind != BatchOutcome::Kind::kStored) continue;
    BatchOutcome next =
        Submit(i % 2 == 0 ? *b : *a, Batch(5, absl::StrCat("agent-", i), 2,
                                           kSeries));
    EXPECT_EQ(next.kind, BatchOutcome::Kind::kStored) << next.status;
  }
  EXPECT_EQ(Scalar("SELECT count(*) FROM series"), "75");
  EXPECT_EQ(Scalar("SELECT count(*) FROM metrics"), "50");
  a->Shutdown(absl::Now() + absl::Seconds(10));
  b->Shutdown(absl::Now() + absl::Seconds(10));
}

TEST_F(SeriesResolverTest, OneGroupOfNewAgentsKeepsOrderAndUnits) {
  std::unique_ptr<PgMetricStore> store = NewStore(1000, 1);
  ASSERT_OK(store->CreateTrial(3, Deadline()));
  // Hold the trial row: the lane's first group waits, and the next
  // batches queue behind it and make one group.
  pqxx::connection other(url());
  pqxx::work other_tx(other);
  other_tx.exec("SELECT 1 FROM trials WHERE id = 3 FOR UPDATE");
  BatchOutcome first;
  Done first_done;
  SubmitAsync(*store, Batch(3, "agent-0", 1, 2), &first, &first_done);
  AwaitWriterBlocked();
  constexpr int kQueued = 4;
  std::vector<BatchOutcome> outcomes(kQueued);
  std::vector<Done> done(kQueued);
  SubmitAsync(*store, Batch(3, "agent-1", 1, 4), &outcomes[0], &done[0]);
  SubmitAsync(*store, Batch(3, "agent-2", 1, 4), &outcomes[1], &done[1]);
  // agent-1 again, declaring a new series and changing a new series' unit.
  MetricBatch changed = Batch(3, "agent-1", 2, 5);
  changed.series[2].unit = "ratio";
  SubmitAsync(*store, changed, &outcomes[2], &done[2]);
  SubmitAsync(*store, Batch(3, "agent-1", 3, 5), &outcomes[3], &done[3]);
  other_tx.commit();
  ASSERT_TRUE(first_done.WaitForNotificationWithTimeout(absl::Seconds(60)));
  for (auto& d : done) {
    ASSERT_TRUE(d.WaitForNotificationWithTimeout(absl::Seconds(60)));
  }
  EXPECT_EQ(first.kind, BatchOutcome::Kind::kStored);
  EXPECT_EQ(outcomes[0].kind, BatchOutcome::Kind::kStored);
  EXPECT_EQ(outcomes[1].kind, BatchOutcome::Kind::kStored);
  EXPECT_EQ(outcomes[2].kind, BatchOutcome::Kind::kRejected);
  EXPECT_THAT(outcomes[2].status,
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "batch.series[2].unit: \"ratio\" differs from "
                       "\"percent\", the unit series \"gpu_util\" of GPU "
                       "GPU-8 of agent agent-1 was registered with"));
  EXPECT_EQ(outcomes[3].kind, BatchOutcome::Kind::kStored);
  // Ids follow each agent's declarations (GPU-9 before GPU-8 ...), and the
  // refused batch registered nothing: agent-1's fifth series came with the
  // batch after it.
  EXPECT_EQ(Scalar("SELECT string_agg(agent_id || ':' || gpu_uuid, ' ' "
                   "ORDER BY series_id) FROM series WHERE agent_id <> "
                   "'agent-0'"),
            "agent-1: agent-1:GPU-9 agent-1:GPU-8 agent-1:GPU-7 "
            "agent-2: agent-2:GPU-9 agent-2:GPU-8 agent-2:GPU-7 "
            "agent-1:GPU-6");
  EXPECT_EQ(Scalar("SELECT series_count FROM trial_series_counts"), "11");
  EXPECT_EQ(Scalar("SELECT count(*) FROM metrics"), "4");
  store->Shutdown(absl::Now() + absl::Seconds(10));
}

}  // namespace
}  // namespace metrics::storage::pg
