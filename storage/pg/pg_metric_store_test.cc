// PgMetricStore against a real PostgreSQL with the real migrations: trials,
// listing them, the reads of rows of the older jsonb form, legacy readings'
// pages, the fleet's latest values, and what a full queue or an unreachable
// database does to a batch. Ingest's own tests are in ingest/.
#include <pqxx/connection>
#include <pqxx/nontransaction>
#include <pqxx/result>
#include <pqxx/transaction>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <map>
#include <random>
#include <set>
#include <thread>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/blocking_counter.h"
#include "absl/synchronization/notification.h"
#include "common/testing/eventually.h"
#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "storage/pg/pg_metric_store.h"
#include "storage/pg/sql_arrays.h"
#include "storage/pg/sql_time.h"
#include "storage/pg/testing/pg_checks.h"
#include "storage/pg/testing/store_test.h"
#include "storage/rollup.h"
#include "storage/format/rollup_codec.h"

namespace metrics::storage::pg {
namespace {

using ::metrics::test_util::StatusIs;
namespace test_util = ::metrics::storage::pg::test_util;
using test_util::kT0;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

class PgMetricStoreTest : public test_util::StoreTest {};

TEST_F(PgMetricStoreTest, TrialLifecycle) {
  ASSERT_OK_AND_ASSIGN(Trial trial, store_->CreateTrial(1, Deadline()));
  EXPECT_EQ(trial.id, 1);
  EXPECT_EQ(trial.state, TrialState::kActive);
  EXPECT_FALSE(trial.ended_at_us.has_value());

  EXPECT_THAT(store_->CreateTrial(1, Deadline()),
              StatusIs(absl::StatusCode::kAlreadyExists,
                       "trial 1 already exists"));
  // The assigned id skips the one registered explicitly.
  ASSERT_OK_AND_ASSIGN(Trial assigned,
                       store_->CreateTrial(std::nullopt, Deadline()));
  EXPECT_NE(assigned.id, 1);
  EXPECT_THAT(store_->CreateTrial(-3, Deadline()),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("id: -3")));

  ASSERT_OK_AND_ASSIGN(Trial ended,
                       store_->SetTrialState(1, TrialState::kCompleted,
                                             Deadline()));
  EXPECT_EQ(ended.state, TrialState::kCompleted);
  ASSERT_TRUE(ended.ended_at_us.has_value());
  ASSERT_OK_AND_ASSIGN(Trial again,
                       store_->SetTrialState(1, TrialState::kCompleted,
                                             Deadline()));
  EXPECT_EQ(again.ended_at_us, ended.ended_at_us);
  EXPECT_THAT(store_->SetTrialState(1, TrialState::kCanceled, Deadline()),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       "trial 1 is already COMPLETED; it cannot become "
                       "CANCELED"));
  ASSERT_OK_AND_ASSIGN(Trial read, store_->GetTrial(1, Deadline()));
  EXPECT_EQ(read.state, TrialState::kCompleted);
  EXPECT_THAT(store_->GetTrial(99, Deadline()),
              StatusIs(absl::StatusCode::kNotFound, "trial 99 does not exist"));
  EXPECT_THAT(store_->SetTrialState(99, TrialState::kError, Deadline()),
              StatusIs(absl::StatusCode::kNotFound));
}

std::vector<int32_t> Ids(const std::vector<Trial>& trials) {
  std::vector<int32_t> ids;
  for (const Trial& t : trials) ids.push_back(t.id);
  return ids;
}

TEST_F(PgMetricStoreTest, ListTrialsNewestFirstByStateAndPage) {
  for (int32_t id : {3, 5, 8, 12}) MakeTrial(id);
  ASSERT_OK(store_->SetTrialState(5, TrialState::kCompleted, Deadline()));

  ASSERT_OK_AND_ASSIGN(std::vector<Trial> all,
                       store_->Reads().ListTrials(TrialListFilter{}, Deadline()));
  EXPECT_THAT(Ids(all), ElementsAre(12, 8, 5, 3));
  EXPECT_EQ(all[2].state, TrialState::kCompleted);

  TrialListFilter active;
  active.state = TrialState::kActive;
  ASSERT_OK_AND_ASSIGN(std::vector<Trial> running,
                       store_->Reads().ListTrials(active, Deadline()));
  EXPECT_THAT(Ids(running), ElementsAre(12, 8, 3));

  TrialListFilter page;
  page.limit = 2;
  ASSERT_OK_AND_ASSIGN(std::vector<Trial> first,
                       store_->Reads().ListTrials(page, Deadline()));
  EXPECT_THAT(Ids(first), ElementsAre(12, 8));
  page.before_id = first.back().id;
  ASSERT_OK_AND_ASSIGN(std::vector<Trial> second,
                       store_->Reads().ListTrials(page, Deadline()));
  EXPECT_THAT(Ids(second), ElementsAre(5, 3));

  page.limit = 0;
  EXPECT_THAT(store_->Reads().ListTrials(page, Deadline()),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "limit: 0 is outside 1..1000"));
}

TEST_F(PgMetricStoreTest, RowsOfTheOldJsonFormAreReadBesidePackedOnes) {
  MakeTrial(7);
  ASSERT_EQ(Submit(Batch(7, 1)).kind, BatchOutcome::Kind::kStored);
  ASSERT_EQ(Submit(Batch(7, 2)).kind, BatchOutcome::Kind::kStored);
  // At kT0 + 1.5 s, between the two, as the old writer stored it.
  Exec(absl::StrCat(
      "INSERT INTO metrics_profiling (trial_id, partition_type, metric_group, "
      "agent_id, end_time, total_batches, metrics) VALUES (7, 'PROFILING', "
      "'system', 'agent-1', to_timestamp(", absl::ToUnixSeconds(kT0),
      " + 1.5), 9, '{\"cpu_util_simple\": 12.5, \"gpu_util\": {\"GPU-2\": 61}}')"));
  ASSERT_OK_AND_ASSIGN(std::vector<SeriesInfo> series,
                       store_->Reads().ListSeries(7, false, Deadline()));
  ASSERT_EQ(series.size(), 3u);  // cpu, GPU-1, GPU-2 (by name, then GPU)
  ASSERT_OK_AND_ASSIGN(
      std::vector<std::vector<Sample>> raw,
      store_->Reads().ReadRawSamples(7, series, absl::ToUnixMicros(kT0),
                             absl::ToUnixMicros(kT0 + absl::Seconds(10)), 100,
                             Deadline()));
  const auto values = [](const std::vector<Sample>& samples) {
    std::vector<double> v;
    for (const Sample& s : samples) v.push_back(s.value);
    return v;
  };
  EXPECT_THAT(values(raw[0]), ElementsAre(11, 12.5, 12));
  EXPECT_THAT(values(raw[1]), ElementsAre(50, 50));  // GPU-1: not in the old row
  EXPECT_THAT(values(raw[2]), ElementsAre(60, 61, 60));
  ASSERT_OK_AND_ASSIGN(std::vector<Reading> readings,
                       store_->ReadReadings(7, series[2], {}, 10, Deadline()));
  ASSERT_EQ(readings.size(), 3u);
  EXPECT_EQ(readings[1].value, 61);
  EXPECT_EQ(readings[1].batch, 9);
}

// A page of raw rows may hold none of a series' values: readings read on
// until they have as many as asked, and stop at the end.

TEST_F(PgMetricStoreTest, ReadingsPageOnPastRowsWithoutTheSeries) {
  MakeTrial(7);
  for (int64_t seq = 1; seq <= 7; ++seq) {
    MetricBatch batch = Batch(7, seq);
    if (seq % 3 != 0) {  // GPU-2 only in reports 3 and 6
      batch.reports[0].series = {0, 1};
      batch.reports[0].values = {1.0 * seq, 2.0 * seq};
    }
    ASSERT_EQ(Submit(std::move(batch)).kind, BatchOutcome::Kind::kStored);
  }
  ASSERT_OK_AND_ASSIGN(std::vector<SeriesInfo> series,
                       store_->Reads().ListSeries(7, false, Deadline()));
  const SeriesInfo& gpu2 = series[2];
  ASSERT_EQ(gpu2.gpu_uuid, "GPU-2");
  ASSERT_OK_AND_ASSIGN(std::vector<Reading> first,
                       store_->ReadReadings(7, gpu2, {}, 1, Deadline()));
  ASSERT_EQ(first.size(), 1u);
  EXPECT_EQ(first[0].time_us, absl::ToUnixMicros(kT0 + absl::Seconds(3)));
  ASSERT_OK_AND_ASSIGN(
      std::vector<Reading> rest,
      store_->ReadReadings(7, gpu2, {first[0].time_us, first[0].row_id}, 2,
                           Deadline()));
  ASSERT_EQ(rest.size(), 1u);
  EXPECT_EQ(rest[0].time_us, absl::ToUnixMicros(kT0 + absl::Seconds(6)));
}

TEST_F(PgMetricStoreTest, FullQueueIsRefusedAndUnreachableDatabaseFailsBatch) {
  PgMetricStoreOptions options;
  options.database_url = "host=127.0.0.1 port=1 connect_timeout=2";
  options.writer.max_queued_values = 5;
  options.writer.retry_for = absl::Seconds(1);
  std::unique_ptr<PgMetricStore> store = NewStore(options);

  absl::Notification done;
  BatchOutcome outcome;
  ASSERT_OK(store->SubmitBatch(Batch(7, 1), [&](BatchOutcome o) {
    outcome = std::move(o);
    done.Notify();
  }));
  // The first batch (3 values) waits for a database that never answers.
  EXPECT_THAT(store->SubmitBatch(Batch(7, 2), [](BatchOutcome) {
    ADD_FAILURE() << "a refused batch must not call back";
  }),
              StatusIs(absl::StatusCode::kResourceExhausted,
                       HasSubstr("the ingest queue is full")));
  ASSERT_TRUE(done.WaitForNotificationWithTimeout(absl::Seconds(30)));
  EXPECT_EQ(outcome.kind, BatchOutcome::Kind::kFailed);
  EXPECT_THAT(outcome.status,
              StatusIs(absl::StatusCode::kUnavailable,
                       HasSubstr("could not commit within 1s")));
  EXPECT_EQ(store->queued_values(), 0u);
  store->Shutdown(absl::Now());
  EXPECT_THAT(store->SubmitBatch(Batch(7, 3), [](BatchOutcome) {}),
              StatusIs(absl::StatusCode::kUnavailable));
}

TEST_F(PgMetricStoreTest, LatestValuesAreTheNewestTrialsFirstUpToTheLimit) {
  // Two active trials of 300 agents each (more than one page of agents),
  // named in both cases so that the order must be byte by byte; a third
  // trial has ended and is left out.
  for (int32_t trial : {7, 8, 9}) MakeTrial(trial);
  std::vector<std::string> agents;
  for (int i = 0; i < 300; ++i) {
    agents.push_back(absl::StrCat(i % 2 ? "Agent-" : "agent-", 1000 - i));
  }
  std::vector<std::pair<int32_t, std::string>> sent = {{9, "agent-ended"}};
  for (int32_t trial : {7, 8}) {
    for (const std::string& agent : agents) sent.emplace_back(trial, agent);
  }
  absl::BlockingCounter outstanding(static_cast<int>(sent.size()));
  std::atomic<int> stored{0};
  for (const auto& [trial, agent] : sent) {
    ASSERT_OK(store_->SubmitBatch(Batch(trial, 1, agent), [&](BatchOutcome o) {
      if (o.kind == BatchOutcome::Kind::kStored) ++stored;
      outstanding.DecrementCount();
    }));
  }
  outstanding.Wait();
  ASSERT_EQ(stored.load(), static_cast<int>(sent.size()));
  ASSERT_OK(store_->SetTrialState(9, TrialState::kCompleted, Deadline()));

  ASSERT_OK_AND_ASSIGN(LatestValues latest,
                       store_->LatestValuesOfActiveTrials(100000, INT64_MIN, Deadline()));
  const std::vector<LatestValue>& all = latest.values;
  std::vector<std::string> sorted = agents;
  std::sort(sorted.begin(), sorted.end());
  std::vector<std::string> expected, got;
  for (int32_t trial : {8, 7}) {
    for (const std::string& agent : sorted) {
      for (const char* series : {"cpu_util_simple  11 percent",
                                 "gpu_util GPU-1 50 percent",
                                 "gpu_util GPU-2 60 percent"}) {
        expected.push_back(absl::StrCat(trial, " ", agent, " ", series));
      }
    }
  }
  for (const LatestValue& v : all) {
    got.push_back(absl::StrCat(v.trial_id, " ", v.agent_id, " ", v.name, " ",
                               v.gpu_uuid, " ", v.value, " ", v.unit));
  }
  EXPECT_EQ(got, expected);

  // A limit inside an agent's series takes the first values of that order.
  ASSERT_OK_AND_ASSIGN(LatestValues cut_values,
                       store_->LatestValuesOfActiveTrials(1001, INT64_MIN, Deadline()));
  const std::vector<LatestValue>& cut = cut_values.values;
  ASSERT_EQ(cut.size(), 1001u);
  got.resize(1001);
  for (size_t i = 0; i < cut.size(); ++i) {
    EXPECT_EQ(absl::StrCat(cut[i].trial_id, " ", cut[i].agent_id, " ",
                           cut[i].name, " ", cut[i].gpu_uuid, " ",
                           cut[i].value, " ", cut[i].unit),
              got[i]);
  }
}

}  // namespace
}  // namespace metrics::storage::pg
