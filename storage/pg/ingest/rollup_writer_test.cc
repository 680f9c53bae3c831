// Rollups as the writer stores them, on a real PostgreSQL: every bucket
// equal to aggregates of the raw rows, merges across gaps, the newest finest
// bucket folded into the coarser widths when a newer one starts, and the
// rollup check finding a raw row that disagrees.
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

class RollupWriterTest : public test_util::StoreTest {};

TEST_F(RollupWriterTest, RollupsEqualAggregatesOfTheRawRows) {
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
                           url(), 7));
  EXPECT_GT(compared, 500);
  ASSERT_OK_AND_ASSIGN(int64_t raw_values,
                       test_util::CountRawValues(url(), 7));
  EXPECT_EQ(raw_values, stored_values);
}

// A group looks for its stored buckets in ranges (RollupRanges): stored
// buckets past a gap of many buckets are found and merged, and a stored
// bucket inside a range that the group has no samples for stays as it is.

TEST_F(RollupWriterTest, RollupsMergeAcrossGapsAndLeaveBucketsBetweenAlone) {
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
                           url(), 7));
  // Buckets of each width: 10 s at 0 10 20 1000 5000; 1 min 4 (kT0 is 40 s
  // past a minute); 10 min 3; 1 h 2; 2 h and 6 h 1. Each holds 3 series.
  EXPECT_EQ(compared, 3 * (5 + 4 + 3 + 2 + 1 + 1));
  ASSERT_OK_AND_ASSIGN(std::string ten_second,
                       test_util::QueryScalar(
                           url(),
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

TEST_F(RollupWriterTest, TheNewestFinestBucketIsFoldedWhenANewerOneStarts) {
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
  ASSERT_OK(test_util::CheckRollupsMatchRawRows(url(), 7));

  ASSERT_EQ(Submit(at(3, 12)).kind, BatchOutcome::Kind::kStored);
  const std::string after_fold =
      "10:2 10:3 60:2 600:2 3600:2 7200:2 21600:2";
  EXPECT_EQ(rows(), after_fold);
  const std::string versions = coarser_versions();
  ASSERT_EQ(Submit(at(4, 13)).kind, BatchOutcome::Kind::kStored);
  EXPECT_EQ(rows(), after_fold);
  EXPECT_EQ(coarser_versions(), versions);  // not rewritten
  ASSERT_OK(test_util::CheckRollupsMatchRawRows(url(), 7));

  ASSERT_EQ(Submit(at(5, 3)).kind, BatchOutcome::Kind::kStored);  // late
  EXPECT_EQ(rows(), after_fold);
  EXPECT_NE(coarser_versions(), versions);
  ASSERT_OK_AND_ASSIGN(int64_t compared,
                       test_util::CheckRollupsMatchRawRows(
                           url(), 7));
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

TEST_F(RollupWriterTest, ANewestBucketWrittenFoldedTakesReportsInEveryWidth) {
  MakeTrial(7);
  ASSERT_EQ(Submit(Batch(7, 1)).kind, BatchOutcome::Kind::kStored);
  // What those versions left: the bucket in every width, all folded.
  {
    pqxx::connection conn(url());
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
  ASSERT_OK(test_util::CheckRollupsMatchRawRows(url(), 7));
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
  ASSERT_OK(test_util::CheckRollupsMatchRawRows(url(), 7));
  MetricBatch newer = Batch(7, 3);
  newer.reports[0].time_us = absl::ToUnixMicros(kT0 + absl::Seconds(12));
  ASSERT_EQ(Submit(newer).kind, BatchOutcome::Kind::kStored);
  ASSERT_OK_AND_ASSIGN(int64_t compared,
                       test_util::CheckRollupsMatchRawRows(
                           url(), 7));
  EXPECT_EQ(compared, 3 * (2 + 5));
  EXPECT_EQ(Scalar("SELECT count(*) FROM system_rollups "
                   "WHERE width_s = 10 AND get_byte(stats, 0) = 3"),
            "1");
}

// Rows written before migration 0004 keep their jsonb: raw reads and
// readings see them beside packed rows, in time order.

TEST_F(RollupWriterTest, RollupCheckSpotsARawRowThatDisagrees) {
  MakeTrial(7);
  ASSERT_EQ(Submit(Batch(7, 1)).kind, BatchOutcome::Kind::kStored);
  ASSERT_EQ(Submit(Batch(7, 2)).kind, BatchOutcome::Kind::kStored);
  ASSERT_OK(test_util::CheckRollupsMatchRawRows(url(), 7));
  // The first report's values replaced by the last one's.
  Exec("UPDATE metrics_profiling SET packed_values = (SELECT packed_values "
       "FROM metrics_profiling ORDER BY end_time DESC LIMIT 1) "
       "WHERE end_time = (SELECT min(end_time) FROM metrics_profiling)");
  EXPECT_THAT(test_util::CheckRollupsMatchRawRows(url(), 7),
              StatusIs(absl::StatusCode::kInternal,
                       HasSubstr("rollup differs at agent agent-1")));
}

}  // namespace
}  // namespace metrics::storage::pg
