// Rollups as the sealer stores them and readers see them, on a real
// PostgreSQL, through the real ingest path: before a seal every bucket comes
// from the raw rows waiting for it, after it from the stored buckets, and a
// read counts each sample once either way (late rows into sealed windows
// too); stored buckets merge across gaps; an earlier version's unfolded
// 10 s bucket is folded by the first seal; and the rollup check finds a raw
// row that disagrees.
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
#include "storage/format/packed_report.h"
#include "storage/pg/jobs/sealer.h"
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

// Collects what a rollup read hands over: per series id, the buckets' stats
// merged by bucket start, as the query engine merges them, checking that
// each series' buckets come in time order (what the engine relies on).
class CollectingSink : public RollupSink {
 public:
  void Restart() override { buckets.clear(); }
  void Take(const RollupRow& row) override {
    for (const auto& [id, stats] : row.stats) {
      std::map<int64_t, RollupStats>& of = buckets[id];
      EXPECT_TRUE(of.empty() || of.rbegin()->first <= row.bucket_start_us)
          << "series " << id << " bucket " << row.bucket_start_us << " after "
          << of.rbegin()->first;
      const auto [it, added] = of.try_emplace(row.bucket_start_us, stats);
      if (!added) it->second.Merge(stats);
    }
  }
  std::map<int64_t, std::map<int64_t, RollupStats>> buckets;
};

class SealedRollupsTest : public test_util::StoreTest {
 protected:
  // Seals every closed window (the test's data is a year old).
  SealSummary Seal() {
    SealOptions options;
    options.database_url = url();
    absl::StatusOr<SealSummary> summary = SealClosedWindows(options);
    EXPECT_OK(summary);
    return summary.value_or(SealSummary());
  }

  // A report of series 0..2 at kT0 + `second`, values `second` * (1, 2, 3).
  static MetricBatch At(int64_t sequence, std::vector<int> seconds) {
    MetricBatch batch = Batch(7, sequence);
    batch.reports.clear();
    for (int s : seconds) {
      batch.reports.push_back({absl::ToUnixMicros(kT0 + absl::Seconds(s)),
                               {0, 1, 2},
                               {1.0 * s, 2.0 * s, 3.0 * s},
                               std::nullopt});
    }
    return batch;
  }

  // Series 0's stats over [kT0's bucket of `width`, + `buckets` widths) as
  // a chart read sees them, by bucket start.
  std::map<int64_t, RollupStats> Read(int width, int buckets = 1) {
    absl::StatusOr<std::vector<SeriesInfo>> series =
        store_->Reads().ListSeries(7, /*extents=*/false, Deadline());
    EXPECT_OK(series);
    if (!series.ok() || series->empty()) return {};
    CollectingSink sink;
    const int64_t start = BucketStartMicros(absl::ToUnixMicros(kT0), width);
    EXPECT_OK(store_->Reads().ReadRollups(7, {"agent-1"}, width, {(*series)[0].series_id}, start,
                                          start + int64_t{buckets} * width * 1000000, Deadline(),
                                          sink));
    return sink.buckets.empty() ? std::map<int64_t, RollupStats>{} : sink.buckets.begin()->second;
  }

  // Series 0's count, sum and extent as a chart sees them: every width
  // must agree, and ListSeries too.
  void ExpectSeen(int64_t count, double sum, int first_s, int last_s) {
    for (int width : kRollupWidthsSeconds) {
      int64_t n = 0;
      double total = 0;
      // Three days of any width hold the test's data.
      for (const auto& [start, stats] : Read(width, 3 * 86400 / width + 1)) {
        n += stats.count;
        total += stats.sum;
      }
      EXPECT_EQ(n, count) << width;
      EXPECT_EQ(total, sum) << width;
    }
    ASSERT_OK_AND_ASSIGN(std::vector<SeriesInfo> series,
                         store_->Reads().ListSeries(7, /*extents=*/true, Deadline()));
    ASSERT_FALSE(series.empty());
    EXPECT_EQ(series[0].sample_count, count);
    EXPECT_EQ(series[0].first_time_us, absl::ToUnixMicros(kT0 + absl::Seconds(first_s)));
    EXPECT_EQ(series[0].last_time_us, absl::ToUnixMicros(kT0 + absl::Seconds(last_s)));
  }
};

TEST_F(SealedRollupsTest, RollupsEqualAggregatesOfTheRawRowsBeforeAndAfterTheSeal) {
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

  // Ingest wrote no rollups: the check adds the waiting rows.
  EXPECT_EQ(Scalar("SELECT count(*) FROM system_rollups"), "0");
  ASSERT_OK_AND_ASSIGN(int64_t compared, test_util::CheckRollupsMatchRawRows(url(), 7));
  EXPECT_GT(compared, 200);
  Seal();
  EXPECT_EQ(Scalar("SELECT count(*) FROM metrics_profiling WHERE packed_values IS NOT NULL"), "0");
  EXPECT_NE(Scalar("SELECT count(*) FROM system_rollups"), "0");
  EXPECT_EQ(Scalar("SELECT count(*) FROM system_rollups WHERE width_s < 60"), "0");
  ASSERT_OK_AND_ASSIGN(const int64_t after, test_util::CheckRollupsMatchRawRows(url(), 7));
  EXPECT_EQ(after, compared);
  ASSERT_OK_AND_ASSIGN(int64_t raw_values, test_util::CountRawValues(url(), 7));
  EXPECT_EQ(raw_values, stored_values);
}

TEST_F(SealedRollupsTest, ReadsCountEverySampleOnceBeforeAndAfterASealAndWithLateRows) {
  MakeTrial(7);
  // Two windows and a day later a third; all closed, none sealed yet.
  ASSERT_EQ(Submit(At(1, {1, 59, 61, 700, 86400})).kind, BatchOutcome::Kind::kStored);
  ExpectSeen(5, 1 + 59 + 61 + 700 + 86400, 1, 86400);
  Seal();
  ExpectSeen(5, 1 + 59 + 61 + 700 + 86400, 1, 86400);
  // Late rows into sealed windows and a new one: read at once, in order
  // among the stored buckets (the sink checks), and once after the next seal.
  ASSERT_EQ(Submit(At(2, {2, 62, 3000})).kind, BatchOutcome::Kind::kStored);
  const int64_t sum = 1 + 59 + 61 + 700 + 86400 + 2 + 62 + 3000;
  ExpectSeen(8, sum, 1, 86400);
  const std::map<int64_t, RollupStats> minutes = Read(60, 3);
  ASSERT_EQ(minutes.size(), 2u);  // kT0 is 40 s past a minute: 1 59 | 61 62 2 ...
  ASSERT_OK(test_util::CheckRollupsMatchRawRows(url(), 7));
  Seal();
  ExpectSeen(8, sum, 1, 86400);
  EXPECT_EQ(Read(60, 3), minutes);
  ASSERT_OK_AND_ASSIGN(const int64_t compared, test_util::CheckRollupsMatchRawRows(url(), 7));
  EXPECT_GT(compared, 0);
}

// A seal looks for stored buckets in ranges (RollupRanges): stored buckets
// past a gap of many buckets are found and merged, and a stored bucket
// inside a range that the seal has no samples for stays as it is.

TEST_F(SealedRollupsTest, StoredBucketsMergeAcrossGapsAndBucketsBetweenStayAlone) {
  MakeTrial(7);
  // Minutes at 0, 1 (only the first seal has it) and, 98 minutes on,
  // 6000 s; 30000 s is past a gap at every width up to 2 hours.
  ASSERT_EQ(Submit(At(1, {1, 30, 6003, 30003})).kind, BatchOutcome::Kind::kStored);
  Seal();
  const std::string minute_between = Scalar(
      "SELECT ctid::text || xmin::text FROM system_rollups WHERE width_s = 60 "
      "ORDER BY bucket_start OFFSET 1 LIMIT 1");
  ASSERT_EQ(Submit(At(2, {2, 6004, 30004})).kind, BatchOutcome::Kind::kStored);
  Seal();
  ASSERT_OK_AND_ASSIGN(int64_t compared, test_util::CheckRollupsMatchRawRows(url(), 7));
  // Buckets of each width (kT0 is 08:26:40): 1 min at 08:26 (1 and 2),
  // 08:27, 10:06 and 16:46; 10 min, 1 h and 2 h 3 each; 6 h 2. Each holds 3
  // series.
  EXPECT_EQ(compared, 3 * (4 + 3 + 3 + 3 + 2));
  EXPECT_EQ(Scalar("SELECT ctid::text || xmin::text FROM system_rollups WHERE width_s = 60 "
                   "ORDER BY bucket_start OFFSET 1 LIMIT 1"),
            minute_between);
  ExpectSeen(7, 1 + 30 + 6003 + 30003 + 2 + 6004 + 30004, 1, 30004);
}

// A database upgraded from a version that wrote rollups at ingest: raw rows
// in the rollups already (format 1) and each agent's newest 10 s bucket
// unfolded (its samples in no coarser width yet). Readers add that bucket
// and the new rows waiting for their seal; the agent's first seal folds the
// bucket into every width and marks it folded.

TEST_F(SealedRollupsTest, AnEarlierVersionsUnfoldedBucketIsFoldedByTheFirstSeal) {
  MakeTrial(7);
  ASSERT_EQ(Submit(At(1, {1})).kind, BatchOutcome::Kind::kStored);
  {
    // What the earlier version left of it: a format-1 row, and the agent's
    // newest 10 s bucket holding it, unfolded.
    pqxx::connection conn(url());
    pqxx::work tx(conn);
    const int64_t t = absl::ToUnixMicros(kT0 + absl::Seconds(1));
    AgentRollup rollup;
    for (const pqxx::row& row :
         tx.exec("SELECT u.series_id, u.value FROM metrics_profiling m "
                 "CROSS JOIN LATERAL metrics_unpack(m.packed_values) u")) {
      rollup[row[0].as<int64_t>()].Add(t, row[1].as<double>());
    }
    ASSERT_EQ(rollup.size(), 3u);
    tx.exec("UPDATE metrics_profiling SET packed_values = set_byte(packed_values, 0, 1)");
    const int64_t bucket = BucketStartMicros(t, kLegacyFinestWidthSeconds);
    tx.exec_params(
        absl::StrCat("INSERT INTO system_rollups (trial_id, agent_id, width_s, bucket_start, "
                     "stats) VALUES (7, 'agent-1', 10, ",
                     TimestampFromMicrosSql("$1::bigint"), ", $2)"),
        bucket, pqxx::binarystring(EncodeAgentRollup(rollup, bucket, Folding::kUnfolded)));
    tx.commit();
  }
  ASSERT_OK(test_util::CheckRollupsMatchRawRows(url(), 7));
  ExpectSeen(1, 1, 1, 1);
  // This version's rows: one in the same 10 s, one later.
  ASSERT_EQ(Submit(At(2, {2, 12})).kind, BatchOutcome::Kind::kStored);
  ASSERT_OK(test_util::CheckRollupsMatchRawRows(url(), 7));
  ExpectSeen(3, 1 + 2 + 12, 1, 12);
  Seal();
  EXPECT_EQ(Scalar("SELECT get_byte(stats, 0) FROM system_rollups WHERE width_s = 10"), "2");
  ASSERT_OK_AND_ASSIGN(const int64_t compared, test_util::CheckRollupsMatchRawRows(url(), 7));
  EXPECT_EQ(compared, 3 * 5);  // one bucket of each width, 3 series
  ExpectSeen(3, 1 + 2 + 12, 1, 12);
  // A second seal (a late row) leaves the folded bucket alone.
  ASSERT_EQ(Submit(At(3, {3})).kind, BatchOutcome::Kind::kStored);
  Seal();
  ExpectSeen(4, 1 + 2 + 12 + 3, 1, 12);
  ASSERT_OK(test_util::CheckRollupsMatchRawRows(url(), 7));
}

TEST_F(SealedRollupsTest, RollupCheckSpotsARawRowThatDisagrees) {
  MakeTrial(7);
  ASSERT_EQ(Submit(Batch(7, 1)).kind, BatchOutcome::Kind::kStored);
  Seal();
  ASSERT_OK(test_util::CheckRollupsMatchRawRows(url(), 7));
  // A row that says it is in the rollups but is not.
  MetricBatch late = Batch(7, 2);
  late.reports[0].values = {100, 200, 300};
  ASSERT_EQ(Submit(late).kind, BatchOutcome::Kind::kStored);
  ASSERT_OK(test_util::CheckRollupsMatchRawRows(url(), 7));
  Exec("UPDATE metrics_profiling SET packed_values = set_byte(packed_values, 0, 1) "
       "WHERE packed_values IS NOT NULL");
  EXPECT_THAT(test_util::CheckRollupsMatchRawRows(url(), 7),
              StatusIs(absl::StatusCode::kInternal, HasSubstr("rollup differs at agent agent-1")));
}

}  // namespace
}  // namespace metrics::storage::pg
