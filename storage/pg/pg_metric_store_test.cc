// PgMetricStore against a real PostgreSQL with the real migrations: trials,
// the ingest contract (exactly once per stream, rejections that store
// nothing), and rollups that equal aggregates over the raw rows.
#include "storage/pg/pg_metric_store.h"

#include <pqxx/connection>
#include <pqxx/nontransaction>
#include <pqxx/binarystring>
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
#include "storage/pg/sql_arrays.h"
#include "storage/pg/sql_time.h"
#include "storage/pg/testing/pg_checks.h"
#include "storage/rollup.h"
#include "storage/format/rollup_codec.h"
#include "tests/testing/test_database.h"

namespace metrics::storage::pg {
namespace {

using ::metrics::test_util::StatusIs;
namespace test_util = ::metrics::storage::pg::test_util;
using ::metrics::test_util::TestDatabase;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

const absl::Time kT0 = absl::FromUnixSeconds(1763800000);  // 2025-11-22

std::unique_ptr<TestDatabase>& SharedDatabase() {
  static auto* db = new std::unique_ptr<TestDatabase>();
  return *db;
}

class PgMetricStoreTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    absl::StatusOr<std::unique_ptr<TestDatabase>> db = TestDatabase::Create();
    ASSERT_OK(db);
    SharedDatabase() = *std::move(db);
  }
  static void TearDownTestSuite() { SharedDatabase().reset(); }

  void SetUp() override {
    ASSERT_NE(SharedDatabase(), nullptr);
    Exec("TRUNCATE trials, metrics, series, system_rollups, ingest_positions, "
         "trial_series_counts");
    store_ = NewStore();
  }
  void TearDown() override {
    if (store_ != nullptr) store_->Shutdown(absl::Now() + absl::Seconds(10));
  }

  std::unique_ptr<PgMetricStore> NewStore(
      PgMetricStoreOptions options = PgMetricStoreOptions()) {
    if (options.database_url.empty()) {
      options.database_url = SharedDatabase()->url();
    }
    options.clock = [] { return kT0 + absl::Hours(24 * 365); };
    return PgMetricStore::Create(std::move(options));
  }

  static pqxx::result Exec(const std::string& sql) {
    pqxx::connection conn(SharedDatabase()->url());
    pqxx::nontransaction tx(conn);
    return tx.exec(sql);
  }
  static std::string Scalar(const std::string& sql) {
    pqxx::result r = Exec(sql);
    return r.empty() || r[0][0].is_null() ? "" : r[0][0].as<std::string>();
  }

  static absl::Time Deadline() { return absl::Now() + absl::Seconds(30); }

  BatchOutcome Submit(MetricStore& store, MetricBatch batch) {
    absl::Notification done;
    BatchOutcome outcome;
    absl::Status queued =
        store.SubmitBatch(std::move(batch), [&](BatchOutcome o) {
          outcome = std::move(o);
          done.Notify();
        });
    EXPECT_OK(queued);
    if (!queued.ok()) return outcome;
    EXPECT_TRUE(done.WaitForNotificationWithTimeout(absl::Seconds(60)));
    return outcome;
  }
  BatchOutcome Submit(MetricBatch batch) {
    return Submit(*store_, std::move(batch));
  }

  static MetricBatch Batch(int32_t trial, int64_t sequence,
                           absl::string_view agent = "agent-1") {
    MetricBatch batch;
    batch.stream_id = absl::StrCat(agent, "-stream");
    batch.sequence = sequence;
    batch.trial_id = trial;
    batch.agent_id = std::string(agent);
    batch.series = {{"cpu_util_simple", "", "percent"},
                    {"gpu_util", "GPU-1", "percent"},
                    {"gpu_util", "GPU-2", "percent"}};
    const absl::Time t = kT0 + absl::Seconds(sequence);
    batch.reports = {{absl::ToUnixMicros(t), {0, 1, 2}, {10.0 + sequence, 50, 60},
                      std::nullopt}};
    return batch;
  }

  void MakeTrial(int32_t id) { ASSERT_OK(store_->CreateTrial(id, Deadline())); }

  // Restarts the store with one writer lane and `options`, makes trial 7,
  // and holds the rollup table for 2 s from the returned thread: commits
  // wait on the lock while the batches submitted meanwhile queue up.
  std::thread RestartWithOneLaneBehindARollupLock(PgMetricStoreOptions options) {
    store_->Shutdown(Deadline());
    options.writer.lanes = 1;
    store_ = NewStore(options);
    MakeTrial(7);
    std::thread lock([] {
      EXPECT_OK(test_util::LockRollupsFor(SharedDatabase()->url(),
                                          absl::Seconds(2)));
    });
    EXPECT_TRUE(::metrics::test_util::Eventually(
        [] {
          return Scalar("SELECT count(*) FROM pg_locks l JOIN pg_class c ON "
                        "c.oid = l.relation WHERE c.relname = "
                        "'system_rollups' AND l.mode = 'AccessExclusiveLock' "
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

  std::unique_ptr<PgMetricStore> store_;
};

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

TEST_F(PgMetricStoreTest, StoresRawRowRegistryRollupsAndPosition) {
  MakeTrial(7);
  BatchOutcome outcome = Submit(Batch(7, 1));
  ASSERT_EQ(outcome.kind, BatchOutcome::Kind::kStored) << outcome.status;

  EXPECT_EQ(Scalar("SELECT count(*) FROM metrics"), "1");
  EXPECT_EQ(Scalar("SELECT format('%s|%s|%s|%s|%s', trial_id, partition_type, "
                   "metric_group, agent_id, end_time AT TIME ZONE 'UTC') "
                   "FROM metrics_profiling"),
            "7|PROFILING|system|agent-1|2025-11-22 08:26:41");
  // Packed: a version byte, then a byte of series id step and kind and one
  // of digits for each of the 3 values. Generic readers see the jsonb
  // through the view.
  EXPECT_EQ(Scalar("SELECT format('%s|%s', metrics IS NULL, "
                   "length(packed_values)) FROM metrics"),
            "t|7");
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
  // The agent's first bucket, not yet folded into the coarser widths.
  EXPECT_EQ(Scalar("SELECT string_agg(width_s || ':' || get_byte(stats, 0), "
                   "',' ORDER BY width_s) FROM system_rollups"),
            "10:3");
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

TEST_F(PgMetricStoreTest, ResentBatchIsSkippedAndAGapIsRefused) {
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

TEST_F(PgMetricStoreTest, RefusedBatchesStoreNothingAndUseTheirSequence) {
  PgMetricStoreOptions options;
  options.limits.max_series_per_trial = 4;
  store_ = NewStore(options);
  MakeTrial(7);
  ASSERT_EQ(Submit(Batch(7, 1)).kind, BatchOutcome::Kind::kStored);
  const std::string rows_before = Scalar("SELECT count(*) FROM metrics");
  const std::string rollups_before =
      Scalar("SELECT md5(string_agg(stats::text, '' ORDER BY width_s)) "
             "FROM system_rollups");

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
  EXPECT_EQ(Scalar("SELECT count(*) FROM metrics"), rows_before);
  EXPECT_EQ(Scalar("SELECT count(*) FROM series"), "3");
  EXPECT_EQ(Scalar("SELECT md5(string_agg(stats::text, '' ORDER BY width_s)) "
                   "FROM system_rollups"),
            rollups_before);
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

TEST_F(PgMetricStoreTest, BatchWithoutStreamIdIsStoredEachTime) {
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

TEST_F(PgMetricStoreTest, RollupsEqualAggregatesOfTheRawRows) {
  MakeTrial(7);
  std::mt19937 random(12345);
  std::uniform_real_distribution<double> value(0, 100);
  std::uniform_int_distribution<int> jitter(-900, 900);  // out of order, late
  const std::vector<std::string> agents = {"agent-a", "agent-b"};
  int64_t stored_values = 0;
  for (const std::string& agent : agents) {
    for (int64_t seq = 1; seq <= 40; ++seq) {
      MetricBatch batch = Batch(7, seq, agent);
      batch.reports.clear();
      for (int r = 0; r < 25; ++r) {
        Report report;
        report.time_us = absl::ToUnixMicros(
            kT0 + absl::Seconds(seq * 20 + jitter(random)) +
            absl::Microseconds(r * 37));
        for (uint32_t s = 0; s < 3; ++s) {
          if (random() % 4 == 0) continue;  // gaps in some series
          report.series.push_back(s);
          // Rare spikes, and repeated times with other values.
          report.values.push_back(random() % 97 == 0 ? 1e6 : value(random));
        }
        if (report.values.empty()) continue;
        stored_values += report.values.size();
        batch.reports.push_back(report);
        if (r % 10 == 0) {
          report.values[0] += 1;
          batch.reports.push_back(report);
          stored_values += report.values.size();
        }
      }
      ASSERT_EQ(Submit(batch).kind, BatchOutcome::Kind::kStored);
    }
  }

  ASSERT_OK_AND_ASSIGN(int64_t compared,
                       test_util::CheckRollupsMatchRawRows(
                           SharedDatabase()->url(), 7));
  EXPECT_GT(compared, 500);
  ASSERT_OK_AND_ASSIGN(int64_t raw_values,
                       test_util::CountRawValues(SharedDatabase()->url(), 7));
  EXPECT_EQ(raw_values, stored_values);
}

// A group looks for its stored buckets in ranges (RollupRanges): stored
// buckets past a gap of many buckets are found and merged, and a stored
// bucket inside a range that the group has no samples for stays as it is.
TEST_F(PgMetricStoreTest, RollupsMergeAcrossGapsAndLeaveBucketsBetweenAlone) {
  MakeTrial(7);
  const auto at = [](int64_t sequence, std::vector<int> seconds) {
    MetricBatch batch = Batch(7, sequence);
    batch.reports.clear();
    for (int s : seconds) {
      batch.reports.push_back({absl::ToUnixMicros(kT0 + absl::Seconds(s)),
                               {0, 1, 2},
                               {1.0 * s, 2.0 * s + sequence, -1.0 * s},
                               std::nullopt});
    }
    return batch;
  };
  // Then 10 s buckets at 0, 20 (the 10 s one between is only stored) and,
  // 98 buckets further on, 1000; 5000 is past a gap at every width up to
  // 10 minutes.
  ASSERT_EQ(Submit(at(1, {1, 12, 1003, 5003})).kind, BatchOutcome::Kind::kStored);
  ASSERT_EQ(Submit(at(2, {2, 25, 1004, 5004})).kind, BatchOutcome::Kind::kStored);
  ASSERT_OK_AND_ASSIGN(int64_t compared,
                       test_util::CheckRollupsMatchRawRows(
                           SharedDatabase()->url(), 7));
  // Buckets of each width: 10 s at 0 10 20 1000 5000; 1 min 4 (kT0 is 40 s
  // past a minute); 10 min 3; 1 h 2; 2 h and 6 h 1. Each holds 3 series.
  EXPECT_EQ(compared, 3 * (5 + 4 + 3 + 2 + 1 + 1));
  ASSERT_OK_AND_ASSIGN(std::string ten_second,
                       test_util::QueryScalar(
                           SharedDatabase()->url(),
                           "SELECT count(*) FROM system_rollups WHERE width_s = 10"));
  EXPECT_EQ(ten_second, "5");
}

// Collects what a rollup read hands over: per series id, the buckets' stats
// merged by bucket start, as the query engine merges them.
class CollectingSink : public RollupSink {
 public:
  void Restart() override { buckets.clear(); }
  void Take(const RollupRow& row) override {
    for (const auto& [id, stats] : row.stats) {
      const auto [it, added] = buckets[id].try_emplace(row.bucket_start_us, stats);
      if (!added) it->second.Merge(stats);
    }
  }
  std::map<int64_t, std::map<int64_t, RollupStats>> buckets;
};

// A report in its agent's newest finest bucket is written to that bucket
// alone; the bucket is folded into the coarser widths when a newer one
// starts, and a late report goes to every width at once (rollup.h). Reads
// of a coarser width and the series' extents count the unfolded bucket.
TEST_F(PgMetricStoreTest, TheNewestFinestBucketIsFoldedWhenANewerOneStarts) {
  MakeTrial(7);
  const auto at = [](int64_t sequence, int second) {
    MetricBatch batch = Batch(7, sequence);
    batch.reports[0].time_us = absl::ToUnixMicros(kT0 + absl::Seconds(second));
    batch.reports[0].values = {1.0 * second, 2.0 * second, 3.0 * second};
    return batch;
  };
  // Width and version byte of each row, in order.
  const auto rows = [] {
    return Scalar(
        "SELECT string_agg(width_s || ':' || get_byte(stats, 0), ' ' ORDER BY "
        "width_s, bucket_start) FROM system_rollups");
  };
  const auto coarser_versions = [] {
    return Scalar(
        "SELECT string_agg(ctid::text || xmin::text, ' ' ORDER BY width_s) "
        "FROM system_rollups WHERE width_s > 10");
  };
  ASSERT_EQ(Submit(at(1, 1)).kind, BatchOutcome::Kind::kStored);
  ASSERT_EQ(Submit(at(2, 2)).kind, BatchOutcome::Kind::kStored);
  EXPECT_EQ(rows(), "10:3");  // unfolded; no coarser bucket yet
  ASSERT_OK(test_util::CheckRollupsMatchRawRows(SharedDatabase()->url(), 7));

  ASSERT_EQ(Submit(at(3, 12)).kind, BatchOutcome::Kind::kStored);
  const std::string after_fold =
      "10:2 10:3 60:2 600:2 3600:2 7200:2 21600:2";
  EXPECT_EQ(rows(), after_fold);
  const std::string versions = coarser_versions();
  ASSERT_EQ(Submit(at(4, 13)).kind, BatchOutcome::Kind::kStored);
  EXPECT_EQ(rows(), after_fold);
  EXPECT_EQ(coarser_versions(), versions);  // not rewritten
  ASSERT_OK(test_util::CheckRollupsMatchRawRows(SharedDatabase()->url(), 7));

  ASSERT_EQ(Submit(at(5, 3)).kind, BatchOutcome::Kind::kStored);  // late
  EXPECT_EQ(rows(), after_fold);
  EXPECT_NE(coarser_versions(), versions);
  ASSERT_OK_AND_ASSIGN(int64_t compared,
                       test_util::CheckRollupsMatchRawRows(
                           SharedDatabase()->url(), 7));
  EXPECT_EQ(compared, 3 * (2 + 5));

  // Each series: samples at 1, 2, 3 (folded) and 12, 13 (unfolded).
  ASSERT_OK_AND_ASSIGN(std::vector<SeriesInfo> series,
                       store_->Reads().ListSeries(7, /*extents=*/true, Deadline()));
  ASSERT_EQ(series.size(), 3u);
  for (const SeriesInfo& info : series) {
    EXPECT_EQ(info.sample_count, 5) << info.series_id;
    EXPECT_EQ(info.first_time_us, absl::ToUnixMicros(kT0 + absl::Seconds(1)));
    EXPECT_EQ(info.last_time_us, absl::ToUnixMicros(kT0 + absl::Seconds(13)));
  }
  const int64_t minute = BucketStartMicros(absl::ToUnixMicros(kT0), 60);
  for (int width : {60, 600, 21600}) {
    CollectingSink sink;
    const int64_t start = BucketStartMicros(absl::ToUnixMicros(kT0), width);
    ASSERT_OK(store_->Reads().ReadRollups(7, {"agent-1"}, width,
                                  {series[0].series_id}, start,
                                  start + int64_t{width} * 1000000, Deadline(),
                                  sink));
    ASSERT_EQ(sink.buckets.size(), 1u) << width;
    const std::map<int64_t, RollupStats>& got = sink.buckets.begin()->second;
    ASSERT_EQ(got.size(), 1u) << width;
    EXPECT_EQ(got.begin()->first, start);
    const RollupStats& stats = got.begin()->second;
    EXPECT_EQ(stats.count, 5) << width;
    EXPECT_EQ(stats.sum, 1 + 2 + 3 + 12 + 13) << width;
    EXPECT_EQ(stats.max, 13) << width;
    EXPECT_EQ(stats.last_value, 13) << width;
  }
  // A window that ends before the unfolded bucket's minute leaves it out.
  CollectingSink before;
  ASSERT_OK(store_->Reads().ReadRollups(7, {"agent-1"}, 60, {series[0].series_id},
                                minute - 60000000, minute, Deadline(), before));
  EXPECT_TRUE(before.buckets.empty());
}

// A newest finest bucket written folded (by versions before folding, which
// wrote every width for each report) takes later reports in every width.
TEST_F(PgMetricStoreTest, ANewestBucketWrittenFoldedTakesReportsInEveryWidth) {
  MakeTrial(7);
  ASSERT_EQ(Submit(Batch(7, 1)).kind, BatchOutcome::Kind::kStored);
  // What those versions left: the bucket in every width, all folded.
  {
    pqxx::connection conn(SharedDatabase()->url());
    pqxx::work tx(conn);
    const pqxx::result finest = tx.exec(absl::StrCat(
        "SELECT ", EpochMicrosSql("bucket_start"),
        ", stats FROM system_rollups WHERE width_s = 10"));
    ASSERT_EQ(finest.size(), 1u);
    const int64_t start = finest[0][0].as<int64_t>();
    ASSERT_OK_AND_ASSIGN(
        AgentRollup rollup,
        DecodeAgentRollup(DecodeByteaHex(finest[0][1].as<std::string>()), start));
    tx.exec("DELETE FROM system_rollups");
    for (int width : kRollupWidthsSeconds) {
      const int64_t bucket = BucketStartMicros(start, width);
      tx.exec_params(
          absl::StrCat("INSERT INTO system_rollups (trial_id, agent_id, "
                       "width_s, bucket_start, stats) VALUES (7, 'agent-1', $1, ",
                       TimestampFromMicrosSql("$2::bigint"), ", $3)"),
          width, bucket,
          pqxx::binarystring(EncodeAgentRollup(rollup, bucket, Folding::kFolded)));
    }
    tx.commit();
  }
  ASSERT_OK(test_util::CheckRollupsMatchRawRows(SharedDatabase()->url(), 7));
  // Reads take such a bucket from the coarser widths, and only from them:
  // the one sample of each series counts once.
  ASSERT_OK_AND_ASSIGN(
      std::vector<SeriesInfo> series,
      store_->Reads().ListSeries(7, /*extents=*/true, Deadline()));
  ASSERT_EQ(series.size(), 3u);
  for (const SeriesInfo& info : series) EXPECT_EQ(info.sample_count, 1);
  for (int width : {60, 21600}) {
    CollectingSink sink;
    const int64_t start = BucketStartMicros(absl::ToUnixMicros(kT0), width);
    ASSERT_OK(store_->Reads().ReadRollups(
        7, {"agent-1"}, width, {series[0].series_id}, start,
        start + int64_t{width} * 1000000, Deadline(), sink));
    ASSERT_EQ(sink.buckets.size(), 1u) << width;
    ASSERT_EQ(sink.buckets.begin()->second.size(), 1u) << width;
    EXPECT_EQ(sink.buckets.begin()->second.begin()->second.count, 1) << width;
  }
  ASSERT_EQ(Submit(Batch(7, 2)).kind, BatchOutcome::Kind::kStored);  // same bucket
  ASSERT_OK(test_util::CheckRollupsMatchRawRows(SharedDatabase()->url(), 7));
  MetricBatch newer = Batch(7, 3);
  newer.reports[0].time_us = absl::ToUnixMicros(kT0 + absl::Seconds(12));
  ASSERT_EQ(Submit(newer).kind, BatchOutcome::Kind::kStored);
  ASSERT_OK_AND_ASSIGN(int64_t compared,
                       test_util::CheckRollupsMatchRawRows(
                           SharedDatabase()->url(), 7));
  EXPECT_EQ(compared, 3 * (2 + 5));
  EXPECT_EQ(Scalar("SELECT count(*) FROM system_rollups "
                   "WHERE width_s = 10 AND get_byte(stats, 0) = 3"),
            "1");
}

// Rows written before migration 0004 keep their jsonb: raw reads and
// readings see them beside packed rows, in time order.
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

TEST_F(PgMetricStoreTest, RollupCheckSpotsARawRowThatDisagrees) {
  MakeTrial(7);
  ASSERT_EQ(Submit(Batch(7, 1)).kind, BatchOutcome::Kind::kStored);
  ASSERT_EQ(Submit(Batch(7, 2)).kind, BatchOutcome::Kind::kStored);
  ASSERT_OK(test_util::CheckRollupsMatchRawRows(SharedDatabase()->url(), 7));
  // The first report's values replaced by the last one's.
  Exec("UPDATE metrics_profiling SET packed_values = (SELECT packed_values "
       "FROM metrics_profiling ORDER BY end_time DESC LIMIT 1) "
       "WHERE end_time = (SELECT min(end_time) FROM metrics_profiling)");
  EXPECT_THAT(test_util::CheckRollupsMatchRawRows(SharedDatabase()->url(), 7),
              StatusIs(absl::StatusCode::kInternal,
                       HasSubstr("rollup differs at agent agent-1")));
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

TEST_F(PgMetricStoreTest, ReportsMinutesApartMakeSmallerGroups) {
  // A backfill: each report in a rollup bucket of its own, so a group's
  // rollup rows, not its values, are what its memory comes to.
  PgMetricStoreOptions options;
  options.writer.max_group_rollup_buckets = 100;
  std::thread lock = RestartWithOneLaneBehindARollupLock(options);
  constexpr int kBatches = 20, kReports = 40;
  std::vector<MetricBatch> batches;
  for (int b = 0; b < kBatches; ++b) {
    MetricBatch batch = Batch(7, b + 1);
    batch.reports.clear();
    for (int r = 0; r < kReports; ++r) {
      const absl::Time t = kT0 + absl::Minutes(b * kReports + r);
      batch.reports.push_back(
          {absl::ToUnixMicros(t), {0, 1, 2}, {1.0 * r, 50, 60}, std::nullopt});
    }
    batches.push_back(std::move(batch));
  }
  SubmitAllAndExpectStored(std::move(batches), lock);
  // One commit, one transaction id on its rows.
  const pqxx::result groups = Exec(
      "SELECT count(*), max(buckets) FROM (SELECT count(DISTINCT "
      "date_bin('10 seconds', end_time, timestamptz 'epoch')) AS buckets "
      "FROM metrics WHERE trial_id = 7 GROUP BY xmin::text) g");
  EXPECT_GE(groups[0][0].as<int>(), kBatches * kReports / 100);
  EXPECT_LE(groups[0][1].as<int>(), 100);
  EXPECT_OK(test_util::CheckRollupsMatchRawRows(SharedDatabase()->url(), 7));
}

TEST_F(PgMetricStoreTest, ManySmallBatchesQueuedAtOnceMakeGroupsOfBoundedSize) {
  // A fan-in after a stall: many agents' one-report batches wait together.
  // Each brings its own position, series and rollup rows, so the group's
  // memory follows its batch count, which the writer bounds.
  PgMetricStoreOptions options;
  options.writer.max_group_batches = 10;
  std::thread lock = RestartWithOneLaneBehindARollupLock(options);
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
  EXPECT_OK(test_util::CheckRollupsMatchRawRows(SharedDatabase()->url(), 7));
}

TEST_F(PgMetricStoreTest, ABusyLaneWaitsForItsGroupToFillWhileBatchesArrive) {
  // Agents' one-report batches arriving 50 ms apart: a lane that lingers
  // until its group is full commits them together, not the first at once.
  store_->Shutdown(Deadline());
  PgMetricStoreOptions options;
  options.writer.lanes = 1;
  options.writer.max_group_batches = 10;
  options.writer.linger_after_batches = 1;
  options.writer.group_linger = absl::Seconds(20);
  options.writer.linger_idle = absl::Seconds(1);
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
  EXPECT_OK(test_util::CheckRollupsMatchRawRows(SharedDatabase()->url(), 7));
}

TEST_F(PgMetricStoreTest, ALaneCommitsAtOnceWhenQuietOrWhenNothingMoreArrives) {
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

TEST_F(PgMetricStoreTest, BatchesWaitingWithPackedLabelsStoreTheSeriesTheyDeclared) {
  // Past the third batch waiting, each keeps its labels packed until its
  // group commits; each agent declares a UUID of its own, runs of the same
  // UUID and unit, and a unit of its own.
  PgMetricStoreOptions options;
  options.writer.pack_labels_after_batches = 3;
  std::thread lock = RestartWithOneLaneBehindARollupLock(options);
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
  EXPECT_OK(test_util::CheckRollupsMatchRawRows(SharedDatabase()->url(), 7));
}

TEST_F(PgMetricStoreTest, AGroupOfManyAgentsWritesTheirRollupsAFewAgentsAtATime) {
  // 45 agents' batches in one group, written in chunks of 25 agents; a
  // third of the agents have two batches there, whose samples land in the
  // same buckets and must merge in order.
  std::thread lock = RestartWithOneLaneBehindARollupLock(PgMetricStoreOptions());
  constexpr int kAgents = 45;
  std::vector<MetricBatch> batches;
  for (int a = 0; a < kAgents; ++a) {
    batches.push_back(Batch(7, 1, absl::StrCat("agent-", a)));
  }
  for (int a = 0; a < kAgents; a += 3) {
    MetricBatch second = Batch(7, 2, absl::StrCat("agent-", a));
    for (Report& r : second.reports) {
      for (double& v : r.values) v = -v - a;
    }
    batches.push_back(std::move(second));
  }
  SubmitAllAndExpectStored(std::move(batches), lock);
  // The first batch commits alone (it met the lock); the rest as one group
  // of more agents than a chunk takes.
  EXPECT_GT(Exec("SELECT max(n) FROM (SELECT count(DISTINCT agent_id) AS n "
                 "FROM metrics WHERE trial_id = 7 GROUP BY xmin::text) g")[0][0]
                .as<int>(),
            25);
  EXPECT_OK(test_util::CheckRollupsMatchRawRows(SharedDatabase()->url(), 7));
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

TEST_F(PgMetricStoreTest, ManyStreamsAtOnceIntoOneAndManyTrials) {
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
  EXPECT_EQ(Scalar("SELECT count(DISTINCT (trial_id, agent_id)) FROM "
                   "system_rollups"),
            std::to_string(kStreams));
  EXPECT_EQ(Scalar("SELECT sum(last_sequence) FROM ingest_positions"),
            std::to_string(kStreams * kBatches));
}

}  // namespace
}  // namespace metrics::storage::pg
