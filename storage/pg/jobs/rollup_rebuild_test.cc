// Rebuilding rollups from raw rows gives what the sealer maintained, and
// leaves raw rows waiting for their seal to it, through the library and
// through `metricsctl rollups rebuild`.
#include "storage/pg/jobs/rollup_rebuild.h"

#include <map>
#include <random>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/notification.h"
#include "common/subprocess.h"
#include "common/testing/status_matchers.h"
#include "common/testing/test_time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "storage/format/rollup_codec.h"
#include "storage/pg/jobs/sealer.h"
#include "storage/pg/pg_metric_store.h"
#include "storage/pg/sql_arrays.h"
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

using Key = std::tuple<std::string, int, std::string>;  // agent, width, start

class RollupRebuildTest : public ::testing::Test {
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
      for (int64_t seq = 1; seq <= 30; ++seq) {
        MetricBatch batch;
        batch.stream_id = agent;
        batch.sequence = seq;
        batch.trial_id = 7;
        batch.agent_id = agent;
        batch.series = {{"cpu_util_simple", "", "percent"},
                        {"gpu_util", "GPU-0", "percent"}};
        for (int r = 0; r < 40; ++r) {
          // Spread over two days, out of order within and across batches.
          batch.reports.push_back(
              {absl::ToUnixMicros(kT0 + absl::Seconds(random() % (2 * 86400)) +
                                  absl::Microseconds(random() % 1000000)),
               {0, 1},
               {(random() % 10000) / 100.0, (random() % 100) * 1.5},
               std::nullopt});
        }
        absl::Notification done;
        ASSERT_OK(store_->SubmitBatch(std::move(batch), [&](BatchOutcome o) {
          EXPECT_EQ(o.kind, BatchOutcome::Kind::kStored) << o.status;
          done.Notify();
        }));
        ASSERT_TRUE(done.WaitForNotificationWithTimeout(absl::Seconds(30)));
      }
    }
    // Into the rollups (the data is a year old: every window is closed).
    SealOptions seal;
    seal.database_url = db_->url();
    ASSERT_OK(SealClosedWindows(seal).status());
  }
  void TearDown() override { store_->Shutdown(absl::Now() + absl::Seconds(5)); }

  std::map<Key, AgentRollup> Snapshot() {
    std::map<Key, AgentRollup> out;
    absl::StatusOr<std::string> rows = test_util::QueryScalar(
        db_->url(),
        "SELECT string_agg(agent_id || '|' || width_s || '|' || "
        "(extract(epoch FROM bucket_start) * 1000000)::bigint || '|' || "
        "encode(stats, 'hex'), ',' ORDER BY 1) FROM system_rollups");
    EXPECT_OK(rows);
    if (!rows.ok() || rows->empty()) return out;
    for (absl::string_view row : absl::StrSplit(*rows, ',')) {
      std::vector<std::string> f = absl::StrSplit(row, '|');
      absl::StatusOr<AgentRollup> r =
          DecodeAgentRollup(DecodeByteaHex("\\x" + f[3]), std::stoll(f[2]));
      EXPECT_OK(r);
      out[{f[0], std::stoi(f[1]), f[2]}] = *r;
    }
    return out;
  }

  static void ExpectSame(const std::map<Key, AgentRollup>& a,
                         const std::map<Key, AgentRollup>& b) {
    ASSERT_EQ(a.size(), b.size());
    for (const auto& [key, rollup] : a) {
      auto it = b.find(key);
      ASSERT_NE(it, b.end()) << std::get<0>(key) << " " << std::get<1>(key);
      ASSERT_EQ(rollup.size(), it->second.size());
      for (const auto& [id, s] : rollup) {
        RollupStats other = it->second.at(id);
        // Sums add in another order: equal up to rounding.
        EXPECT_NEAR(other.sum, s.sum, 1e-9 * std::max(1.0, std::abs(s.sum)));
        other.sum = s.sum;
        EXPECT_TRUE(other == s) << std::get<0>(key) << " width "
                                << std::get<1>(key) << " series " << id;
      }
    }
  }

  std::unique_ptr<TestDatabase> db_;
  std::unique_ptr<PgMetricStore> store_;
};

TEST_F(RollupRebuildTest, RebuildRestoresWhatTheSealerMaintained) {
  const std::map<Key, AgentRollup> maintained = Snapshot();
  ASSERT_GT(maintained.size(), 100u);
  // Damage: lose some buckets, scramble others.
  ASSERT_OK(test_util::QueryScalar(
      db_->url(), "DELETE FROM system_rollups WHERE width_s = 60"));
  ASSERT_OK(test_util::QueryScalar(
      db_->url(),
      "UPDATE system_rollups SET stats = '\\x01'::bytea WHERE width_s = 600"));

  int64_t last_done = 0, last_total = -1;
  ASSERT_OK_AND_ASSIGN(
      RebuildSummary summary,
      RebuildRollups(db_->url(), 7, [&](const RebuildProgress& p) {
        EXPECT_GE(p.reports_done, last_done);
        last_done = p.reports_done;
        last_total = p.reports_total;
      }));
  EXPECT_EQ(summary.agents, 2);
  EXPECT_EQ(summary.reports, 2 * 30 * 40);
  EXPECT_EQ(summary.samples, 2 * 30 * 40 * 2);
  EXPECT_EQ(summary.buckets, static_cast<int64_t>(maintained.size()));
  EXPECT_EQ(last_done, last_total);
  ExpectSame(maintained, Snapshot());
  ASSERT_OK(test_util::CheckRollupsMatchRawRows(db_->url(), 7));

  // A report not sealed yet: a rebuild leaves it to its seal (readers add
  // it meanwhile), or it would count twice.
  MetricBatch late;
  late.stream_id = "agent-a";
  late.sequence = 31;
  late.trial_id = 7;
  late.agent_id = "agent-a";
  late.series = {{"cpu_util_simple", "", "percent"}};
  late.reports.push_back({absl::ToUnixMicros(kT0 + absl::Seconds(5)), {0}, {12.5}, std::nullopt});
  absl::Notification stored;
  ASSERT_OK(store_->SubmitBatch(std::move(late), [&](BatchOutcome o) {
    EXPECT_EQ(o.kind, BatchOutcome::Kind::kStored) << o.status;
    stored.Notify();
  }));
  ASSERT_TRUE(stored.WaitForNotificationWithTimeout(absl::Seconds(30)));
  ASSERT_OK_AND_ASSIGN(summary, RebuildRollups(db_->url(), 7, nullptr));
  EXPECT_EQ(summary.reports, 2 * 30 * 40 + 1);
  EXPECT_EQ(summary.samples, 2 * 30 * 40 * 2);
  ASSERT_OK(test_util::CheckRollupsMatchRawRows(db_->url(), 7));

  EXPECT_THAT(RebuildRollups(db_->url(), 404, nullptr),
              StatusIs(absl::StatusCode::kNotFound, "trial 404 does not exist"));
}

TEST_F(RollupRebuildTest, MetricsctlRebuildsWithProgressAndSummary) {
  const std::map<Key, AgentRollup> maintained = Snapshot();
  ASSERT_OK(test_util::QueryScalar(db_->url(), "TRUNCATE system_rollups"));
  ASSERT_OK_AND_ASSIGN(
      auto run, Subprocess::Start({METRICSCTL_PATH, "rollups", "rebuild",
                                   "--trial", "7"},
                                  {"DATABASE_URL=" + db_->url()}));
  ASSERT_OK_AND_ASSIGN(int code, run->Wait(absl::Seconds(60)));
  EXPECT_EQ(code, 0) << run->stderr_text();
  EXPECT_THAT(run->stderr_text(),
              HasSubstr("rebuilding trial 7: agent 2/2 (agent-b), 2400/2400 "
                        "reports (100%)"));
  EXPECT_THAT(run->stdout_text(),
              ContainsRegex("rebuilt [0-9]+ rollup buckets of trial 7 \\(2 "
                            "agents\\) from 2400 reports \\(4800 values\\)"));
  ExpectSame(maintained, Snapshot());

  ASSERT_OK_AND_ASSIGN(
      auto missing, Subprocess::Start({METRICSCTL_PATH, "rollups", "rebuild",
                                       "--trial", "404"},
                                      {"DATABASE_URL=" + db_->url()}));
  ASSERT_OK_AND_ASSIGN(code, missing->Wait(absl::Seconds(60)));
  EXPECT_EQ(code, 1);
  EXPECT_THAT(missing->stderr_text(),
              HasSubstr("metricsctl: error: trial 404 does not exist"));
}

}  // namespace
}  // namespace metrics::storage::pg
