#include "storage/rollup.h"

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

}  // namespace
}  // namespace metrics::storage
