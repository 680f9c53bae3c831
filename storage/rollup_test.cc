#include "storage/rollup.h"

#include <random>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace metrics::storage {
namespace {

TEST(RollupTest, AddKeepsExtremesAndFirstAndLastByTime) {
  RollupStats s;
  s.Add(20, 5);
  s.Add(10, 7);   // earlier: becomes first
  s.Add(30, -1);  // later: becomes last, and the minimum
  s.Add(30, 9);   // same time, ingested later: last; the maximum
  EXPECT_EQ(s.count, 4);
  EXPECT_EQ(s.sum, 20);
  EXPECT_EQ(s.min, -1);
  EXPECT_EQ(s.max, 9);
  EXPECT_EQ(s.first_time_us, 10);
  EXPECT_EQ(s.first_value, 7);
  EXPECT_EQ(s.last_time_us, 30);
  EXPECT_EQ(s.last_value, 9);
}

TEST(RollupTest, MergingPartsEqualsAddingAll) {
  const std::vector<std::pair<int64_t, double>> samples = {
      {50, 1}, {10, 4}, {70, 2}, {10, 8}, {90, -3}, {90, 6}, {20, 0}};
  RollupStats all;
  for (const auto& [t, v] : samples) all.Add(t, v);
  for (size_t split = 0; split <= samples.size(); ++split) {
    RollupStats a, b;
    for (size_t i = 0; i < samples.size(); ++i) {
      (i < split ? a : b).Add(samples[i].first, samples[i].second);
    }
    a.Merge(b);
    EXPECT_EQ(a, all) << "split at " << split;
  }
}

TEST(RollupTest, BucketsAlignToTheEpochAndFloorNegativeTimes) {
  EXPECT_EQ(BucketStartMicros(25'000'000, 10), 20'000'000);
  EXPECT_EQ(BucketStartMicros(20'000'000, 10), 20'000'000);
  EXPECT_EQ(BucketStartMicros(3'599'999'999, 3600), 0);
  EXPECT_EQ(BucketStartMicros(-1, 10), -10'000'000);
}

TEST(RollupTest, MergeAgentRollupMergesPerSeries) {
  AgentRollup a, b;
  a[1].Add(10, 1);
  b[1].Add(20, 2);
  b[2].Add(30, 3);
  MergeAgentRollup(a, b);
  EXPECT_EQ(a[1].count, 2);
  EXPECT_EQ(a[1].last_value, 2);
  EXPECT_EQ(a[2].count, 1);
}

// Ingest merges buckets as sorted vectors: the same as the map merge,
// with the earlier side's samples first.
TEST(RollupTest, MergeSortedRollupsEqualsTheMapMerge) {
  std::mt19937_64 random(5);
  for (int round = 0; round < 500; ++round) {
    AgentRollup earlier, later;
    for (AgentRollup* side : {&earlier, &later}) {
      const int series = static_cast<int>(random() % 8);
      for (int s = 0; s < series; ++s) {
        const int64_t id = 1 + static_cast<int64_t>(random() % 12);
        // Times that tie across the sides too: first and last must come
        // from the earlier side then.
        (*side)[id].Add(static_cast<int64_t>(random() % 4),
                        static_cast<double>(random() % 100));
      }
    }
    AgentRollup want = earlier;
    MergeAgentRollup(want, later);
    const SortedRollup got =
        MergeSortedRollups(SortedRollup(earlier.begin(), earlier.end()),
                           SortedRollup(later.begin(), later.end()));
    ASSERT_EQ(got, SortedRollup(want.begin(), want.end())) << "round " << round;
  }
}

}  // namespace
}  // namespace metrics::storage
