// Raw-data retention against a real database: what goes is exactly the raw
// system rows before the horizon; rollups, the registry and newer rows stay
// as they were; reads of an expired window say so; ingest running alongside
// loses nothing; and the CLI shows progress and a summary.
#include "storage/pg/jobs/raw_retention.h"

#include <atomic>
#include <random>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "common/subprocess.h"
#include "common/testing/status_matchers.h"
#include "common/testing/test_time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "storage/pg/jobs/rollup_rebuild.h"
#include "storage/pg/jobs/sealer.h"
#include "storage/pg/pg_metric_store.h"
#include "storage/pg/testing/pg_checks.h"
#include "tests/testing/test_database.h"

namespace metrics::storage::pg {
namespace {

using ::metrics::test_util::StatusIs;
using ::metrics::common::Subprocess;
using ::metrics::test_util::TestDatabase;
using ::testing::ContainsRegex;
using ::testing::HasSubstr;

using ::metrics::test_util::kT0;
// A day after kT0, at a window's start: no sealed window spans it.
const absl::Time kHorizon = absl::FromUnixSeconds(1763886000);

class RawRetentionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_OK_AND_ASSIGN(db_, TestDatabase::Create());
    PgMetricStoreOptions options;
    options.database_url = db_->url();
    options.clock = [] { return kT0 + absl::Hours(24 * 30); };
    store_ = PgMetricStore::Create(options);
    ASSERT_OK(store_->CreateTrial(7, absl::Now() + absl::Seconds(30)));
    std::mt19937 random(7);
    for (const char* agent : {"agent-a", "agent-b"}) {
      for (int64_t seq = 1; seq <= 20; ++seq) {
        std::vector<int64_t> times;
        for (int r = 0; r < 50; ++r) {
          // Over two days, either side of the horizon.
          times.push_back(absl::ToUnixMicros(
              kT0 + absl::Seconds(random() % (2 * 86400)) +
              absl::Microseconds(random() % 1000000)));
        }
        Submit(agent, seq, times);
      }
    }
    // Sealed, as a running metricsd's sealer leaves it (the data is a year
    // old: every window is closed).
    SealOptions seal;
    seal.database_url = db_->url();
    ASSERT_OK(SealClosedWindows(seal).status());
  }
  void TearDown() override { store_->Shutdown(absl::Now() + absl::Seconds(5)); }

  void Submit(const std::string& agent, int64_t seq,
              const std::vector<int64_t>& times) {
    MetricBatch batch;
    batch.stream_id = agent;
    batch.sequence = seq;
    batch.trial_id = 7;
    batch.agent_id = agent;
    batch.series = {{"cpu_util_simple", "", "percent"},
                    {"gpu_util", "GPU-0", "percent"}};
    for (int64_t t : times) {
      batch.reports.push_back(
          {t, {0, 1}, {static_cast<double>(t % 10000) / 100, 42.5}, std::nullopt});
    }
    absl::Notification done;
    ASSERT_OK(store_->SubmitBatch(std::move(batch), [&](BatchOutcome o) {
      EXPECT_EQ(o.kind, BatchOutcome::Kind::kStored) << o.status;
      done.Notify();
    }));
    ASSERT_TRUE(done.WaitForNotificationWithTimeout(absl::Seconds(30)));
  }

  std::string Scalar(const std::string& sql) {
    absl::StatusOr<std::string> v = test_util::QueryScalar(db_->url(), sql);
    EXPECT_OK(v);
    return v.ok() ? *v : "";
  }
  std::string RawRowsBefore(absl::Time t) {
    return Scalar(absl::StrCat(
        "SELECT count(*) FROM metrics_profiling WHERE end_time < "
        "to_timestamp(", absl::ToUnixSeconds(t), ")"));
  }
  // Everything retention must leave alone, as text.
  std::string Kept(absl::Time horizon) {
    return Scalar(absl::StrCat(
        "SELECT (SELECT string_agg(format('%s|%s|%s|%s', agent_id, width_s, "
        "bucket_start, encode(stats, 'hex')), ',' ORDER BY 1) FROM "
        "system_rollups) || (SELECT string_agg(format('%s|%s|%s|%s', "
        "series_id, agent_id, gpu_uuid, name), ',' ORDER BY 1) FROM series) "
        "|| (SELECT string_agg(format('%s|%s|%s|%s%s', id, agent_id, end_time, "
        "encode(packed_values, 'hex'), encode(sealed_values, 'hex')), ',' ORDER BY id) FROM "
        "metrics_profiling WHERE end_time >= to_timestamp(",
        absl::ToUnixSeconds(horizon), "))"));
  }
  RetentionOptions Options() {
    RetentionOptions o;
    o.database_url = db_->url();
    o.raw_retention = absl::Hours(24 * 5);
    o.now = kHorizon + o.raw_retention;
    o.rows_per_step = 20;
    return o;
  }

  std::unique_ptr<TestDatabase> db_;
  std::unique_ptr<PgMetricStore> store_;
};

TEST_F(RawRetentionTest, OldRawRowsGoAndNothingElse) {
  const std::string before = RawRowsBefore(kHorizon);
  // Sealed windows of 2 agents over a day (10 minutes each).
  ASSERT_GT(std::stoi(before), 100);
  ASSERT_LE(std::stoi(before), 2 * 144);
  const std::string kept = Kept(kHorizon);

  RetentionOptions dry = Options();
  dry.dry_run = true;
  ASSERT_OK_AND_ASSIGN(RetentionSummary counted, ApplyRawRetention(dry));
  EXPECT_EQ(counted.rows, std::stoi(before));
  EXPECT_EQ(counted.horizon, kHorizon);
  EXPECT_EQ(RawRowsBefore(kHorizon), before);  // the dry run changed nothing
  EXPECT_EQ(Scalar("SELECT count(*) FROM raw_retention"), "0");

  int steps = 0;
  RetentionOptions apply = Options();
  apply.progress = [&](const RetentionProgress&) { ++steps; };
  ASSERT_OK_AND_ASSIGN(RetentionSummary done, ApplyRawRetention(apply));
  EXPECT_EQ(done.rows, std::stoi(before));
  EXPECT_EQ(done.agents, 2);
  EXPECT_TRUE(done.vacuumed);
  EXPECT_GT(steps, 2 * 5);  // bounded steps of 20 rows
  EXPECT_EQ(RawRowsBefore(kHorizon), "0");
  EXPECT_EQ(Kept(kHorizon), kept);
  EXPECT_EQ(Scalar("SELECT horizon = to_timestamp(" +
                   std::to_string(absl::ToUnixSeconds(kHorizon)) +
                   ") FROM raw_retention"),
            "t");

  // A longer retention later neither moves the horizon back nor removes.
  RetentionOptions longer = Options();
  longer.raw_retention = absl::Hours(24 * 6);
  ASSERT_OK_AND_ASSIGN(RetentionSummary again, ApplyRawRetention(longer));
  EXPECT_EQ(again.rows, 0);
  EXPECT_EQ(again.horizon, kHorizon);
  EXPECT_EQ(Kept(kHorizon), kept);

  // Reads of a window that starts before the horizon say so; after, read.
  ASSERT_OK_AND_ASSIGN(std::vector<SeriesInfo> series,
                       store_->Reads().ListSeries(7, false, absl::Now() + absl::Seconds(10)));
  EXPECT_THAT(store_->Reads().ReadRawSamples(7, series, absl::ToUnixMicros(kHorizon) - 1,
                                     absl::ToUnixMicros(kHorizon + absl::Hours(1)),
                                     100000, absl::Now() + absl::Seconds(10)),
              StatusIs(absl::StatusCode::kOutOfRange,
                       HasSubstr("have expired (raw retention)")));
  EXPECT_OK(store_->Reads().ReadRawSamples(7, series, absl::ToUnixMicros(kHorizon),
                                   absl::ToUnixMicros(kHorizon + absl::Hours(1)),
                                   100000, absl::Now() + absl::Seconds(10)));
  // A rebuild would lose the expired windows' rollups: refused.
  EXPECT_THAT(RebuildRollups(db_->url(), 7, nullptr),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("raw-data retention removed")));
  EXPECT_EQ(Kept(kHorizon), kept);
}

TEST_F(RawRetentionTest, IngestAlongsideLosesNothingNewer) {
  // Reports, not rows: retention seals what is raw before it removes.
  const std::string newer = absl::StrCat(
      "SELECT count(*) FROM metrics_unpacked WHERE trial_id = 7 AND end_time >= to_timestamp(",
      absl::ToUnixSeconds(kHorizon), ")");
  const int64_t newer_before = std::stoll(Scalar(newer));
  std::atomic<bool> stop{false};
  int64_t submitted = 0;
  std::thread ingest([&] {
    // New reports after the horizon, and some old ones, which may go.
    for (int64_t seq = 21; seq < 31 || (!stop.load() && seq < 2000); ++seq) {
      std::vector<int64_t> times;
      for (int r = 0; r < 20; ++r) {
        times.push_back(absl::ToUnixMicros(kHorizon + absl::Hours(30) +
                                           absl::Seconds(seq * 20 + r)));
      }
      submitted += 20;
      times.push_back(absl::ToUnixMicros(kT0 + absl::Seconds(seq)));
      Submit("agent-a", seq, times);
    }
  });
  for (int round = 0; round < 3; ++round) {
    RetentionOptions o = Options();
    o.rows_per_step = 20;
    ASSERT_OK(ApplyRawRetention(o));
  }
  stop = true;
  ingest.join();
  EXPECT_EQ(std::stoll(Scalar(newer)), newer_before + submitted);
  ASSERT_OK_AND_ASSIGN(int64_t repeated,
                       test_util::CountRepeatedReports(db_->url(), 7));
  EXPECT_EQ(repeated, 0);
}

TEST_F(RawRetentionTest, MetricsctlCountsThenRemovesWithProgress) {
  // The CLI's clock is the real one: a retention reaching back to the
  // horizon from now.
  const std::string retention = absl::StrCat(
      absl::ToInt64Hours(absl::Now() - kHorizon), "h");
  const std::string before = RawRowsBefore(kHorizon);
  ASSERT_OK_AND_ASSIGN(
      auto dry, Subprocess::Start({METRICSCTL_PATH, "retention", "apply",
                                   "--raw-retention=" + retention, "--dry-run"},
                                  {"DATABASE_URL=" + db_->url()}));
  ASSERT_OK_AND_ASSIGN(int code, dry->Wait(absl::Seconds(60)));
  EXPECT_EQ(code, 0) << dry->stderr_text();
  EXPECT_THAT(dry->stdout_text(),
              ContainsRegex("dry run: [0-9]+ raw rows of 2 agents are before "
                            "2025-11-2[34]T[0-9:.]+Z and would be removed; "
                            "nothing changed"));
  EXPECT_EQ(RawRowsBefore(kHorizon), before);

  ASSERT_OK_AND_ASSIGN(
      auto run, Subprocess::Start({METRICSCTL_PATH, "retention", "apply",
                                   "--raw-retention", retention},
                                  {"DATABASE_URL=" + db_->url()}));
  ASSERT_OK_AND_ASSIGN(code, run->Wait(absl::Seconds(60)));
  EXPECT_EQ(code, 0) << run->stderr_text();
  EXPECT_THAT(run->stderr_text(),
              ContainsRegex("removing: agent 2/2 \\(agent-b of trial 7\\), "
                            "[0-9]+ rows removed"));
  EXPECT_THAT(run->stdout_text(),
              ContainsRegex("removed [0-9]+ raw rows before 2025-11-2[34]T"
                            "[0-9:.]+Z \\(2 agents\\) in [0-9.]+ s, partition "
                            "vacuumed; rollups kept"));
  // Every row wholly before the horizon went (a window across it stays).
  EXPECT_EQ(Scalar("SELECT count(*) FROM metrics_profiling m, raw_retention r "
                   "WHERE m.end_time + interval '600 seconds' <= r.horizon"),
            "0");

  ASSERT_OK_AND_ASSIGN(
      auto bad, Subprocess::Start({METRICSCTL_PATH, "retention", "apply",
                                   "--raw-retention=-3d"},
                                  {"DATABASE_URL=" + db_->url()}));
  ASSERT_OK_AND_ASSIGN(code, bad->Wait(absl::Seconds(60)));
  EXPECT_EQ(code, 2);
  EXPECT_THAT(bad->stderr_text(),
              HasSubstr("--raw-retention -3d: must be a positive duration"));
}

}  // namespace
}  // namespace metrics::storage::pg
