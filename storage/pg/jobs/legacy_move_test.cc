// The move of trial_profiler_metrics into the new storage, on a real
// PostgreSQL: old-shaped rows (several trials; system and timing types; GB
// and Gbit/s units) are moved reading for reading with the units converted;
// a second run changes nothing; a run interrupted (between rounds, or killed
// outright) goes on where it stopped when run again; --dry-run writes
// nothing.
#include "storage/pg/jobs/legacy_move.h"

#include <signal.h>

#include <algorithm>
#include <tuple>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "common/subprocess.h"
#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "storage/legacy_profiler.h"
#include "storage/pg/pg_metric_store.h"
#include "storage/pg/testing/pg_checks.h"
#include "tests/testing/test_database.h"

namespace metrics::storage::pg {
namespace {

using ::metrics::common::Subprocess;
using ::metrics::test_util::TestDatabase;
using ::testing::HasSubstr;

// (group, agent, gpu, stored name, time_us, batch, stored value)
using Reading = std::tuple<std::string, std::string, std::string, std::string,
                           int64_t, int32_t, double>;

constexpr int64_t kT0Us = 1705610865000000;  // 2024-01-18T20:47:45Z
constexpr int kReadingsPerRow = 25;
constexpr int kRowsPerSeries = 4;

class LegacyMoveTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_OK_AND_ASSIGN(db_, TestDatabase::Create());
    // Trial 2 is known to the service and still ACTIVE; 1 and 3 are not.
    PgMetricStoreOptions options;
    options.database_url = db_->url();
    store_ = PgMetricStore::Create(options);
    ASSERT_OK(store_->CreateTrial(2, absl::Now() + absl::Seconds(30)));
    Seed();
  }

  void TearDown() override { store_->Shutdown(absl::Now()); }

  // One legacy row per (trial, series, round) of kReadingsPerRow readings.
  void Seed() {
    struct Series {
      const char* name;
      const char* gpu;
      const char* type;
    };
    const Series kSeries[] = {
        {"gpu_util", "GPU-0", "PROFILER_METRIC_TYPE_SYSTEM"},
        {"gpu_util", "GPU-1", "PROFILER_METRIC_TYPE_SYSTEM"},
        {"free_memory", "", "PROFILER_METRIC_TYPE_SYSTEM"},
        {"net_throughput_sent", "", "PROFILER_METRIC_TYPE_SYSTEM"},
        {"dataloader_next", "", "PROFILER_METRIC_TYPE_TIMING"},
    };
    for (int trial = 1; trial <= 3; ++trial) {
      for (const Series& s : kSeries) {
        const std::string group =
            *GroupOfLegacyType(s.type);
        const StoredName stored = FromLegacy(group, s.name);
        for (int round = 0; round < kRowsPerSeries; ++round) {
          std::vector<std::string> values, batches, times;
          for (int i = 0; i < kReadingsPerRow; ++i) {
            const int n = round * kReadingsPerRow + i;
            const float value = 0.37f * static_cast<float>(n) + trial;
            const int64_t t = kT0Us + n * 1000000 + 123000;
            values.push_back(absl::StrFormat("%.9g", value));
            batches.push_back(absl::StrCat(n * 10));
            times.push_back(absl::StrCat("timestamptz 'epoch' + ", t,
                                         " * interval '1 microsecond'"));
            expected_.emplace_back(group, "agent-1", s.gpu, stored.name, t,
                                   n * 10,
                                   static_cast<double>(value) * stored.scale);
          }
          ASSERT_OK(test_util::QueryScalar(
              db_->url(),
              absl::StrCat(
                  "INSERT INTO trial_profiler_metrics (values, batches, ts, "
                  "labels) VALUES (ARRAY[",
                  absl::StrJoin(values, ","), "]::float4[], ARRAY[",
                  absl::StrJoin(batches, ","), "], ARRAY[",
                  absl::StrJoin(times, ","), "], jsonb_build_object('trialId', ",
                  trial, ", 'name', '", s.name,
                  "', 'agentId', 'agent-1', 'gpuUuid', '", s.gpu,
                  "', 'metricType', '", s.type, "')) RETURNING id"))
                        .status());
          ++rows_;
        }
      }
    }
    std::sort(expected_.begin(), expected_.end());
  }

  // Every reading stored, of every trial and group, through the store.
  std::vector<Reading> Stored() {
    std::vector<Reading> all;
    for (int32_t trial = 1; trial <= 3; ++trial) {
      absl::StatusOr<std::vector<SeriesInfo>> series =
          store_->ListSeriesOfEveryGroup(trial, absl::Now() + absl::Seconds(30));
      if (!series.ok()) continue;
      for (const SeriesInfo& s : *series) {
        absl::StatusOr<std::vector<storage::Reading>> readings =
            store_->ReadReadings(trial, s, {}, 1000000,
                                 absl::Now() + absl::Seconds(30));
        EXPECT_OK(readings.status());
        if (!readings.ok()) continue;
        for (const storage::Reading& r : *readings) {
          all.emplace_back(s.metric_group, s.agent_id, s.gpu_uuid, s.name,
                           r.time_us, r.batch.value_or(-1), r.value);
        }
      }
    }
    std::sort(all.begin(), all.end());
    return all;
  }

  int64_t RawRows() {
    absl::StatusOr<std::string> n =
        test_util::QueryScalar(db_->url(), "SELECT count(*) FROM metrics");
    return n.ok() ? std::stoll(*n) : -1;
  }

  void ExpectRollupsExact() {
    for (int32_t trial = 1; trial <= 3; ++trial) {
      ASSERT_OK_AND_ASSIGN(int64_t buckets, test_util::CheckRollupsMatchRawRows(
                                                db_->url(), trial));
      EXPECT_GT(buckets, 0);
    }
  }

  LegacyMoveOptions Options(int rows_per_chunk = 7) {
    LegacyMoveOptions options;
    options.database_url = db_->url();
    options.rows_per_chunk = rows_per_chunk;
    return options;
  }

  std::unique_ptr<TestDatabase> db_;
  std::unique_ptr<PgMetricStore> store_;
  std::vector<Reading> expected_;
  int64_t rows_ = 0;
};

TEST_F(LegacyMoveTest, MovesEveryReadingThenChangesNothing) {
  ASSERT_OK_AND_ASSIGN(LegacyMoveSummary dry, [&] {
    LegacyMoveOptions options = Options();
    options.dry_run = true;
    return MoveLegacyProfilerData(options);
  }());
  EXPECT_EQ(dry.rows, rows_);
  EXPECT_EQ(dry.rows_moved, rows_);
  EXPECT_EQ(dry.readings, static_cast<int64_t>(expected_.size()));
  EXPECT_EQ(dry.trials, 3);
  EXPECT_EQ(dry.trials_created, 2);
  EXPECT_EQ(RawRows(), 0) << "a dry run wrote";

  std::vector<LegacyMoveProgress> seen;
  LegacyMoveOptions options = Options();
  options.progress = [&](const LegacyMoveProgress& p) { seen.push_back(p); };
  ASSERT_OK_AND_ASSIGN(LegacyMoveSummary first, MoveLegacyProfilerData(options));
  EXPECT_EQ(first.rows_moved, rows_);
  EXPECT_EQ(first.rows_already, 0);
  EXPECT_EQ(first.rows_refused, 0);
  EXPECT_EQ(first.readings, static_cast<int64_t>(expected_.size()));
  EXPECT_EQ(first.trials_created, 2);
  ASSERT_FALSE(seen.empty());
  EXPECT_EQ(seen.back().rows_done, rows_);
  EXPECT_EQ(seen.back().rows_total, rows_);
  EXPECT_GT(seen.size(), 5u) << "progress is reported per round";

  EXPECT_EQ(Stored(), expected_);
  ExpectRollupsExact();
  // Trials the service did not know are history; the known one keeps its
  // state.
  ASSERT_OK_AND_ASSIGN(Trial one, store_->GetTrial(1, absl::Now() + absl::Seconds(5)));
  EXPECT_EQ(one.state, TrialState::kCompleted);
  ASSERT_OK_AND_ASSIGN(Trial two, store_->GetTrial(2, absl::Now() + absl::Seconds(5)));
  EXPECT_EQ(two.state, TrialState::kActive);

  const int64_t raw_rows = RawRows();
  ASSERT_OK_AND_ASSIGN(LegacyMoveSummary second, MoveLegacyProfilerData(Options()));
  EXPECT_EQ(second.rows_moved, 0);
  EXPECT_EQ(second.rows_already, rows_);
  EXPECT_EQ(second.readings, 0);
  EXPECT_EQ(second.trials_created, 0);
  EXPECT_EQ(RawRows(), raw_rows);
  EXPECT_EQ(Stored(), expected_);
}

TEST_F(LegacyMoveTest, InterruptedMoveGoesOnWhereItStopped) {
  int rounds = 0;
  LegacyMoveOptions options = Options(10);
  options.progress = [&](const LegacyMoveProgress&) { ++rounds; };
  options.interrupted = [&] { return rounds >= 2; };
  ASSERT_OK_AND_ASSIGN(LegacyMoveSummary first, MoveLegacyProfilerData(options));
  EXPECT_TRUE(first.interrupted);
  EXPECT_EQ(first.rows_moved, 20);

  ASSERT_OK_AND_ASSIGN(LegacyMoveSummary rest, MoveLegacyProfilerData(Options(10)));
  EXPECT_FALSE(rest.interrupted);
  EXPECT_EQ(rest.rows_already, 20);
  EXPECT_EQ(rest.rows_moved, rows_ - 20);
  EXPECT_EQ(Stored(), expected_);
  ExpectRollupsExact();
}

TEST_F(LegacyMoveTest, KilledMetricsctlLosesAndDuplicatesNothing) {
  ASSERT_OK_AND_ASSIGN(
      auto killed,
      Subprocess::Start({METRICSCTL_PATH, "legacy", "move", "--chunk-rows", "1",
                         "--database-url", db_->url()}));
  ASSERT_OK(killed->WaitForLine("rows,", absl::Seconds(30)).status());
  killed->Signal(SIGKILL);
  ASSERT_OK_AND_ASSIGN(int code, killed->Wait(absl::Seconds(30)));
  EXPECT_EQ(code, 128 + SIGKILL);

  ASSERT_OK_AND_ASSIGN(
      auto again, Subprocess::Start({METRICSCTL_PATH, "legacy", "move",
                                     "--database-url", db_->url()}));
  ASSERT_OK_AND_ASSIGN(code, again->Wait(absl::Seconds(60)));
  EXPECT_EQ(code, 0) << again->stderr_text();
  EXPECT_THAT(again->stdout_text(), HasSubstr("done: "));
  EXPECT_THAT(again->stdout_text(), HasSubstr("0 not movable"));
  EXPECT_EQ(Stored(), expected_);
  ExpectRollupsExact();
}

TEST_F(LegacyMoveTest, UnmovableRowsAreListedNotSilentlyDropped) {
  ASSERT_OK(test_util::QueryScalar(
                db_->url(),
                "INSERT INTO trial_profiler_metrics (values, batches, ts, labels) "
                "VALUES (ARRAY[1, 2]::float4[], ARRAY[1], ARRAY[now()], "
                "'{\"trialId\": 1, \"name\": \"x\", \"agentId\": \"a\", "
                "\"metricType\": \"PROFILER_METRIC_TYPE_MISC\"}') RETURNING id")
                .status());
  ASSERT_OK_AND_ASSIGN(
      auto run, Subprocess::Start({METRICSCTL_PATH, "legacy", "move",
                                   "--database-url", db_->url()}));
  ASSERT_OK_AND_ASSIGN(int code, run->Wait(absl::Seconds(60)));
  EXPECT_EQ(code, 1);
  EXPECT_THAT(run->stdout_text(), HasSubstr("1 not movable"));
  EXPECT_THAT(run->stdout_text(), HasSubstr("unequal lengths"));
  EXPECT_EQ(Stored(), expected_);
}

}  // namespace
}  // namespace metrics::storage::pg
