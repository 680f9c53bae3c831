#include "client/pending_samples.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace metrics::client {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

const absl::Time kT0 = absl::FromUnixSeconds(1700000000);

TEST(PendingSamplesTest, BatchDeclaresUsedSeriesAndGroupsAnInstant) {
  PendingSamples p;
  const uint32_t cpu = *p.Intern("cpu_util_simple", "", "percent", 10);
  const uint32_t gpu0 = *p.Intern("gpu_util", "GPU-0", "percent", 10);
  const uint32_t unused = *p.Intern("memory_free", "", "bytes", 10);
  EXPECT_EQ(*p.Intern("gpu_util", "GPU-0", "percent", 10), gpu0);
  EXPECT_NE(unused, cpu);
  p.Push(kT0, cpu, 1.5, kT0);
  p.Push(kT0, gpu0, 90, kT0);
  p.Push(kT0 + absl::Nanoseconds(1500), gpu0, 91, kT0);
  // The same series twice at one instant needs a second report.
  p.Push(kT0 + absl::Nanoseconds(1500), gpu0, 92, kT0);

  v1::SystemMetricsBatch b = p.TakeBatch(100, "host-1");
  EXPECT_EQ(b.agent_id(), "host-1");
  ASSERT_EQ(b.series_size(), 2);
  EXPECT_EQ(b.series(0).name(), "cpu_util_simple");
  EXPECT_EQ(b.series(1).gpu_uuid(), "GPU-0");
  ASSERT_EQ(b.reports_size(), 3);
  EXPECT_EQ(b.reports(0).time().seconds(), 1700000000);
  // Every declared series in order: sent without indexes.
  EXPECT_THAT(b.reports(0).series(), IsEmpty());
  EXPECT_THAT(b.reports(0).values(), ElementsAre(1.5, 90));
  EXPECT_EQ(b.reports(1).time().nanos(), 1500);
  EXPECT_THAT(b.reports(1).series(), ElementsAre(1));
  EXPECT_THAT(b.reports(1).values(), ElementsAre(91));
  EXPECT_THAT(b.reports(2).values(), ElementsAre(92));
  EXPECT_EQ(p.size(), 0);
  EXPECT_EQ(p.oldest_recorded(), absl::InfiniteFuture());
}

TEST(PendingSamplesTest, TakesOldestFirstAndRenumbersPerBatch) {
  PendingSamples p;
  const uint32_t a = *p.Intern("a", "", "u", 10);
  const uint32_t b = *p.Intern("b", "", "u", 10);
  p.Push(kT0, a, 1, kT0);
  p.Push(kT0 + absl::Seconds(1), b, 2, kT0 + absl::Seconds(5));
  p.Push(kT0 + absl::Seconds(2), b, 3, kT0 + absl::Seconds(6));
  v1::SystemMetricsBatch first = p.TakeBatch(1, "h");
  EXPECT_THAT(first.reports(0).values(), ElementsAre(1));
  EXPECT_EQ(p.oldest_recorded(), kT0 + absl::Seconds(5));
  v1::SystemMetricsBatch second = p.TakeBatch(10, "h");
  ASSERT_EQ(second.series_size(), 1);  // only b, as index 0
  EXPECT_EQ(second.series(0).name(), "b");
  EXPECT_THAT(second.reports(1).series(), IsEmpty());  // all of one series
}

TEST(PendingSamplesTest, DropOldestAndSeriesCap) {
  PendingSamples p;
  const uint32_t a = *p.Intern("a", "", "u", 2);
  EXPECT_TRUE(p.Intern("b", "", "u", 2).has_value());
  EXPECT_FALSE(p.Intern("c", "", "u", 2).has_value());
  EXPECT_TRUE(p.Intern("a", "", "u", 2).has_value());  // known ones still work
  for (int i = 0; i < 5; ++i) p.Push(kT0 + absl::Seconds(i), a, i, kT0 + absl::Seconds(i));
  p.DropOldest(3);
  EXPECT_EQ(p.size(), 2);
  EXPECT_EQ(p.oldest_recorded(), kT0 + absl::Seconds(3));
  v1::SystemMetricsBatch batch = p.TakeBatch(10, "h");
  ASSERT_EQ(batch.reports_size(), 2);
  EXPECT_THAT(batch.reports(0).values(), ElementsAre(3));
}

TEST(PendingSamplesTest, TimesBeforeTheEpochKeepNonNegativeNanos) {
  PendingSamples p;
  const uint32_t a = *p.Intern("a", "", "u", 1);
  p.Push(absl::FromUnixNanos(-1500000000), a, 1, kT0);
  v1::SystemMetricsBatch b = p.TakeBatch(1, "h");
  EXPECT_EQ(b.reports(0).time().seconds(), -2);
  EXPECT_EQ(b.reports(0).time().nanos(), 500000000);
}

}  // namespace
}  // namespace metrics::client
