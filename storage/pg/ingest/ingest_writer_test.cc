// The group-commit writer through PgMetricStore on a real PostgreSQL: what a
// stored batch writes (raw row, registry, stream position),
// exactly once per stream (a resent batch skipped, a gap refused, a refused
// batch storing nothing), and how lanes group batches (bounded groups, a
// busy lane waiting to fill, a quiet one committing at once, many streams
// at once).
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

class IngestWriterTest : public test_util::StoreTest {
 protected:
  // Restarts the store with one writer lane and `options`, makes trial 7,
  // and holds the stream positions for 2 s from the returned thread:
  // commits wait on the lock while the batches submitted meanwhile queue up.
  std::thread RestartWithOneLaneBehindALock(PgMetricStoreOptions options) {
    store_->Shutdown(Deadline());
    options.writer.lanes = 1;
    store_ = NewStore(options);
    MakeTrial(7);
    std::thread lock([] {
      EXPECT_OK(test_util::HoldIngestFor(url(), absl::Seconds(2)));
    });
    EXPECT_TRUE(::metrics::test_util::Eventually(
        [] {
          return Scalar("SELECT count(*) FROM pg_locks l JOIN pg_class c ON "
                        "c.oid = l.relation WHERE c.relname = "
                        "'ingest_positions' AND l.mode = 'ExclusiveLock' "
                        "AND l.granted") == "1";
        },
        absl::Seconds(10)));
    return lock;
  }

  // Submits `batches` at once (queued behind `lock`'s hold), waits for
  // every outcome and the hold's end, and expects each batch stored.
  void SubmitAllAndExpectStored(std::vector<MetricBatch> batches,
                                std::thread& lock) {
    absl::BlockingCounter outstanding(static_cast<int>(batches.size()));
    std::vector<BatchOutcome> outcomes(batches.size());
    for (size_t b = 0; b < batches.size(); ++b) {
      ASSERT_OK(store_->SubmitBatch(std::move(batches[b]), [&, b](BatchOutcome o) {
        outcomes[b] = std::move(o);
        outstanding.DecrementCount();
      }));
    }
    outstanding.Wait();
    lock.join();
    for (const BatchOutcome& o : outcomes) {
      EXPECT_EQ(o.kind, BatchOutcome::Kind::kStored) << o.status;
    }
  }
};

TEST_F(IngestWriterTest, StoresRawRowRegistryAndPositionAndNoRollups) {
  MakeTrial(7);
  BatchOutcome outcome = Submit(Batch(7, 1));
  ASSERT_EQ(outcome.kind, BatchOutcome::Kind::kStored) << outcome.status;

  EXPECT_EQ(Scalar("SELECT count(*) FROM metrics"), "1");
  EXPECT_EQ(Scalar("SELECT format('%s|%s|%s|%s|%s', trial_id, partition_type, "
                   "metric_group, agent_id, end_time AT TIME ZONE 'UTC') "
                   "FROM metrics_profiling"),
            "7|PROFILING|system|agent-1|2025-11-22 08:26:41");
  // Packed: a version byte (2: not in the rollups yet), then a byte of
  // series id step and kind and one of digits for each of the 3 values.
  // Generic readers see the jsonb through the view.
  EXPECT_EQ(Scalar("SELECT format('%s|%s|%s', metrics IS NULL, "
                   "length(packed_values), get_byte(packed_values, 0)) FROM metrics"),
            "t|7|2");
  EXPECT_EQ(Scalar("SELECT metrics::text FROM metrics_unpacked"),
            "{\"gpu_util\": {\"GPU-1\": 50, \"GPU-2\": 60}, "
            "\"cpu_util_simple\": 11}");
  EXPECT_EQ(Scalar("SELECT string_agg(format('%s/%s/%s', agent_id, "
                   "coalesce(nullif(gpu_uuid, ''), '-'), name || ':' || unit), "
                   "',' ORDER BY name, gpu_uuid) FROM series"),
            "agent-1/-/cpu_util_simple:percent,agent-1/GPU-1/gpu_util:percent,"
            "agent-1/GPU-2/gpu_util:percent");
  EXPECT_EQ(Scalar("SELECT last_sequence FROM ingest_positions WHERE "
                   "trial_id = 7 AND stream_id = 'agent-1-stream'"),
            "1");
  // The sealer adds the row to the rollups; readers add it meanwhile.
  EXPECT_EQ(Scalar("SELECT count(*) FROM system_rollups"), "0");
  EXPECT_OK(test_util::CheckRollupsMatchRawRows(url(), 7));
  ASSERT_OK_AND_ASSIGN(StreamStart start,
                       store_->GetStreamStart(7, "agent-1-stream", Deadline()));
  EXPECT_EQ(start.trial.id, 7);
  EXPECT_EQ(start.trial.state, TrialState::kActive);
  EXPECT_EQ(start.position, 1);
  ASSERT_OK_AND_ASSIGN(start,
                       store_->GetStreamStart(7, "a-new-stream", Deadline()));
  EXPECT_EQ(start.position, 0);
  EXPECT_EQ(store_->GetStreamStart(8, "agent-1-stream", Deadline())
                .status()
                .code(),
            absl::StatusCode::kNotFound);
}

TEST_F(IngestWriterTest, ResentBatchIsSkippedAndAGapIsRefused) {
  MakeTrial(7);
  ASSERT_EQ(Submit(Batch(7, 1)).kind, BatchOutcome::Kind::kStored);
  ASSERT_EQ(Submit(Batch(7, 2)).kind, BatchOutcome::Kind::kStored);

  BatchOutcome resent = Submit(Batch(7, 2));
  EXPECT_EQ(resent.kind, BatchOutcome::Kind::kDuplicate);
  EXPECT_OK(resent.status);

  BatchOutcome gap = Submit(Batch(7, 5));
  EXPECT_EQ(gap.kind, BatchOutcome::Kind::kFailed);
  EXPECT_THAT(gap.status,
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       "batch.sequence 5: stream \"agent-1-stream\" expects "
                       "sequence 3 next"));
  EXPECT_EQ(Scalar("SELECT count(*) FROM metrics"), "2");
  EXPECT_EQ(Scalar("SELECT last_sequence FROM ingest_positions"), "2");
  // The same stream id in another trial is another stream.
  MakeTrial(8);
  EXPECT_EQ(Submit(Batch(8, 1)).kind, BatchOutcome::Kind::kStored);
}

TEST_F(IngestWriterTest, RefusedBatchesStoreNothingAndUseTheirSequence) {
  PgMetricStoreOptions options;
  options.limits.max_series_per_trial = 4;
  store_ = NewStore(options);
  MakeTrial(7);
  ASSERT_EQ(Submit(Batch(7, 1)).kind, BatchOutcome::Kind::kStored);
  const std::string rows_before =
      Scalar("SELECT count(*) || md5(string_agg(packed_values::text, '')) FROM metrics");

  struct Case {
    std::string what;
    std::function<void(MetricBatch&)> spoil;
    absl::StatusCode code;
    std::string message;
  };
  const std::vector<Case> cases = {
      {"NaN", [](MetricBatch& b) { b.reports[0].values[1] = std::nan(""); },
       absl::StatusCode::kInvalidArgument,
       "batch.reports[0].values[1]: NaN is not a finite number"},
      {"unit change", [](MetricBatch& b) { b.series[0].unit = "ratio"; },
       absl::StatusCode::kInvalidArgument,
       "batch.series[0].unit: \"ratio\" differs from \"percent\", the unit "
       "series \"cpu_util_simple\" of agent agent-1 was registered with"},
      {"too many series",
       [](MetricBatch& b) {
         b.series.push_back({"disk_iops", "", "1/s"});
         b.series.push_back({"memory_free", "", "bytes"});
         b.reports[0].series.push_back(3);
         b.reports[0].values.push_back(1);
       },
       absl::StatusCode::kResourceExhausted,
       "batch.series: trial 7 has 3 series and this batch adds 2; the limit "
       "per trial is 4"},
      {"unknown trial", [](MetricBatch& b) { b.trial_id = 404; },
       absl::StatusCode::kNotFound, "batch.trial_id: trial 404 does not exist"},
  };
  int64_t sequence = 2;
  for (const Case& c : cases) {
    MetricBatch batch = Batch(7, sequence);
    c.spoil(batch);
    // Another trial's stream of the same id starts at 1.
    if (batch.trial_id != 7) batch.sequence = 1;
    BatchOutcome outcome = Submit(batch);
    EXPECT_EQ(outcome.kind, BatchOutcome::Kind::kRejected) << c.what;
    EXPECT_THAT(outcome.status, StatusIs(c.code, HasSubstr(c.message)))
        << c.what;
    if (batch.trial_id == 7) ++sequence;
  }
  EXPECT_EQ(Scalar("SELECT count(*) || md5(string_agg(packed_values::text, '')) FROM metrics"),
            rows_before);
  EXPECT_EQ(Scalar("SELECT count(*) FROM series"), "3");
  // The refused batches used their sequence numbers: the next one is stored.
  EXPECT_EQ(Scalar("SELECT last_sequence FROM ingest_positions WHERE "
                   "trial_id = 7"),
            std::to_string(sequence - 1));
  EXPECT_EQ(Submit(Batch(7, sequence)).kind, BatchOutcome::Kind::kStored);

  ASSERT_OK(store_->SetTrialState(7, TrialState::kCompleted, Deadline()));
  BatchOutcome late = Submit(Batch(7, sequence + 1));
  EXPECT_EQ(late.kind, BatchOutcome::Kind::kRejected);
  EXPECT_THAT(late.status,
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       "batch.trial_id: trial 7 is COMPLETED and takes no "
                       "more metrics"));
}

TEST_F(IngestWriterTest, BatchWithoutStreamIdIsStoredEachTime) {
  MakeTrial(7);
  MetricBatch batch = Batch(7, 1);
  batch.stream_id.clear();
  EXPECT_EQ(Submit(batch).kind, BatchOutcome::Kind::kStored);
  EXPECT_EQ(Submit(batch).kind, BatchOutcome::Kind::kStored);
  EXPECT_EQ(Scalar("SELECT count(*) FROM metrics"), "2");
  EXPECT_EQ(Scalar("SELECT count(*) FROM ingest_positions"), "0");
  batch.agent_id = "";
  BatchOutcome bad = Submit(batch);
  EXPECT_EQ(bad.kind, BatchOutcome::Kind::kRejected);
  EXPECT_THAT(bad.status, StatusIs(absl::StatusCode::kInvalidArgument,
                                   "batch.agent_id: must not be empty"));
}

TEST_F(IngestWriterTest, ManySmallBatchesQueuedAtOnceMakeGroupsOfBoundedSize) {
  // A fan-in after a stall: many agents' one-report batches wait together.
  // Each brings its own position and series, so the group's
  // memory follows its batch count, which the writer bounds.
  PgMetricStoreOptions options;
  options.writer.max_group_batches = 10;
  std::thread lock = RestartWithOneLaneBehindALock(options);
  constexpr int kAgents = 45;
  std::vector<MetricBatch> batches;
  for (int a = 0; a < kAgents; ++a) {
    batches.push_back(Batch(7, 1, absl::StrCat("agent-", a)));
  }
  SubmitAllAndExpectStored(std::move(batches), lock);
  // A transaction id per commit: 45 batches in groups of at most 10.
  const pqxx::result groups =
      Exec("SELECT count(*), max(n), sum(n) FROM (SELECT count(*) AS n FROM "
           "metrics WHERE trial_id = 7 GROUP BY xmin::text) g");
  EXPECT_GE(groups[0][0].as<int>(), 5);
  EXPECT_EQ(groups[0][1].as<int>(), 10);
  EXPECT_EQ(groups[0][2].as<int>(), kAgents);
  EXPECT_OK(test_util::CheckRollupsMatchRawRows(url(), 7));
}

TEST_F(IngestWriterTest, ABusyLaneWaitsForItsGroupToFillWhileBatchesArrive) {
  // Agents' one-report batches arriving 50 ms apart: a lane that lingers
  // until its group is full commits them together, not the first at once.
  store_->Shutdown(Deadline());
  PgMetricStoreOptions options;
  options.writer.lanes = 1;
  options.writer.max_group_batches = 10;
  options.writer.linger_after_batches = 1;
  options.writer.group_linger = absl::Seconds(20);
  options.writer.linger_idle = absl::Seconds(1);
  options.writer.linger_idle_small = absl::Seconds(1);
  store_ = NewStore(options);
  MakeTrial(7);
  constexpr int kAgents = 10;
  absl::BlockingCounter outstanding(kAgents);
  std::vector<BatchOutcome> outcomes(kAgents);
  const absl::Time start = absl::Now();
  for (int a = 0; a < kAgents; ++a) {
    if (a > 0) absl::SleepFor(absl::Milliseconds(50));
    ASSERT_OK(store_->SubmitBatch(Batch(7, 1, absl::StrCat("agent-", a)),
                                  [&, a](BatchOutcome o) {
                                    outcomes[a] = std::move(o);
                                    outstanding.DecrementCount();
                                  }));
  }
  outstanding.Wait();
  // Full at the tenth batch: committed then, not at the linger's bound.
  EXPECT_LT(absl::Now() - start, absl::Seconds(10));
  for (const BatchOutcome& o : outcomes) {
    EXPECT_EQ(o.kind, BatchOutcome::Kind::kStored) << o.status;
  }
  EXPECT_EQ(Scalar("SELECT count(DISTINCT xmin::text) FROM metrics "
                   "WHERE trial_id = 7"),
            "1");
  EXPECT_OK(test_util::CheckRollupsMatchRawRows(url(), 7));
}

TEST_F(IngestWriterTest, ALaneCommitsAtOnceWhenQuietOrWhenNothingMoreArrives) {
  // A lane lingers only when it finds `linger_after_batches` queued, and
  // stops once nothing arrives for `linger_idle`: a sender that waits for
  // its acknowledgements before sending more is not held for the linger.
  const auto restart = [&](size_t linger_after, absl::Duration idle) {
    store_->Shutdown(Deadline());
    PgMetricStoreOptions options;
    options.writer.lanes = 1;
    options.writer.linger_after_batches = linger_after;
    options.writer.group_linger = absl::Seconds(60);
    options.writer.linger_idle = idle;
    store_ = NewStore(options);
  };
  // Quiet: one batch, below the lane's threshold; the linger and its idle
  // bound (a minute each) would hold it past Submit's wait.
  restart(/*linger_after=*/8, /*idle=*/absl::Seconds(60));
  MakeTrial(7);
  absl::Time start = absl::Now();
  EXPECT_EQ(Submit(Batch(7, 1)).kind, BatchOutcome::Kind::kStored);
  EXPECT_LT(absl::Now() - start, absl::Seconds(10));

  // Busy, then nothing more: three batches at once; the lingering lane
  // gives up 200 ms after the last arrival.
  restart(/*linger_after=*/1, /*idle=*/absl::Milliseconds(200));
  absl::BlockingCounter outstanding(3);
  start = absl::Now();
  for (int a = 0; a < 3; ++a) {
    ASSERT_OK(store_->SubmitBatch(Batch(7, 1, absl::StrCat("busy-", a)),
                                  [&](BatchOutcome o) {
                                    EXPECT_EQ(o.kind, BatchOutcome::Kind::kStored)
                                        << o.status;
                                    outstanding.DecrementCount();
                                  }));
  }
  outstanding.Wait();
  EXPECT_LT(absl::Now() - start, absl::Seconds(10));
}

TEST_F(IngestWriterTest, ASmallGroupWaitsThroughPausesThatEndALargeOnesWait) {
  // Two batches at once, a third 600 ms later. A group of few values waits
  // through the pause (`linger_idle_small`) and commits all three together;
  // a group of as many values as `linger_small_values` stops after
  // `linger_idle` and commits the third apart.
  const auto run = [&](int32_t trial, size_t small_values) -> std::string {
    store_->Shutdown(Deadline());
    PgMetricStoreOptions options;
    options.writer.lanes = 1;
    options.writer.linger_after_batches = 1;
    options.writer.group_linger = absl::Seconds(30);
    options.writer.linger_idle = absl::Milliseconds(200);
    options.writer.linger_idle_small = absl::Seconds(2);
    options.writer.linger_small_values = small_values;
    store_ = NewStore(options);
    MakeTrial(trial);
    absl::BlockingCounter outstanding(3);
    for (int a = 0; a < 3; ++a) {
      if (a == 2) absl::SleepFor(absl::Milliseconds(600));
      EXPECT_OK(store_->SubmitBatch(
          Batch(trial, 1, absl::StrCat("agent-", a)), [&](BatchOutcome o) {
            EXPECT_EQ(o.kind, BatchOutcome::Kind::kStored) << o.status;
            outstanding.DecrementCount();
          }));
    }
    outstanding.Wait();
    return Scalar(absl::StrCat("SELECT count(DISTINCT xmin::text) FROM "
                               "metrics WHERE trial_id = ", trial));
  };
  // Each Batch holds a few values: far fewer than 1000, as many as 1.
  EXPECT_EQ(run(7, 1000), "1");
  EXPECT_EQ(run(8, 1), "2");
}

TEST_F(IngestWriterTest, BatchesWaitingWithPackedLabelsStoreTheSeriesTheyDeclared) {
  // Past the third batch waiting, each keeps its labels packed until its
  // group commits; each agent declares a UUID of its own, runs of the same
  // UUID and unit, and a unit of its own.
  PgMetricStoreOptions options;
  options.writer.pack_labels_after_batches = 3;
  std::thread lock = RestartWithOneLaneBehindALock(options);
  constexpr int kAgents = 20;
  const auto uuid = [](int a) {
    return absl::StrCat("GPU-", a, "-5f3c1c4e-8f2b-1d2e-9a3b-4c5d6e7f8a9b");
  };
  std::vector<MetricBatch> batches;
  for (int a = 0; a < kAgents; ++a) {
    MetricBatch batch = Batch(7, 1, absl::StrCat("agent-", a));
    batch.series = {{"cpu_util_simple", "", "percent"},
                    {"gpu_util", uuid(a), "percent"},
                    {"gpu_free_memory", uuid(a), absl::StrCat("unit-", a)}};
    batches.push_back(std::move(batch));
  }
  SubmitAllAndExpectStored(std::move(batches), lock);
  ASSERT_OK_AND_ASSIGN(std::vector<SeriesInfo> series,
                       store_->Reads().ListSeries(7, /*extents=*/true, Deadline()));
  std::set<std::tuple<std::string, std::string, std::string, std::string>>
      stored, declared;
  for (const SeriesInfo& info : series) {
    stored.emplace(info.agent_id, info.name, info.gpu_uuid, info.unit);
    EXPECT_EQ(info.sample_count, 1) << info.agent_id << " " << info.name;
  }
  for (int a = 0; a < kAgents; ++a) {
    const std::string agent = absl::StrCat("agent-", a);
    declared.emplace(agent, "cpu_util_simple", "", "percent");
    declared.emplace(agent, "gpu_util", uuid(a), "percent");
    declared.emplace(agent, "gpu_free_memory", uuid(a), absl::StrCat("unit-", a));
  }
  EXPECT_EQ(stored, declared);
  EXPECT_OK(test_util::CheckRollupsMatchRawRows(url(), 7));
}

TEST_F(IngestWriterTest, ManyStreamsAtOnceIntoOneAndManyTrials) {
  MakeTrial(1);
  MakeTrial(2);
  constexpr int kStreams = 16, kBatches = 30;
  std::atomic<int> stored{0};
  std::vector<std::thread> threads;
  for (int s = 0; s < kStreams; ++s) {
    threads.emplace_back([&, s] {
      const std::string agent = absl::StrCat("agent-", s);
      for (int64_t seq = 1; seq <= kBatches; ++seq) {
        BatchOutcome o = Submit(Batch(s % 2 + 1, seq, agent));
        if (o.kind == BatchOutcome::Kind::kStored) ++stored;
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(stored.load(), kStreams * kBatches);
  EXPECT_EQ(Scalar("SELECT count(*) FROM metrics"),
            std::to_string(kStreams * kBatches));
  EXPECT_EQ(Scalar("SELECT count(DISTINCT (trial_id, agent_id)) FROM metrics"),
            std::to_string(kStreams));
  EXPECT_EQ(Scalar("SELECT sum(last_sequence) FROM ingest_positions"),
            std::to_string(kStreams * kBatches));
}

}  // namespace
}  // namespace metrics::storage::pg
