#include "query/plan.h"

#include "gtest/gtest.h"

namespace metrics::query {
namespace {

constexpr int64_t kSecond = 1000000;
constexpr int64_t kDay = 86400 * kSecond;
const int64_t kT0 = int64_t{1763800000} * kSecond;

TEST(PlanTest, PicksTheCoarsestStoredWidthThatGivesTheDetailAskedFor) {
  // A week at 1000 points wants 604.8 s: 600 s stored, widened to 1200 s.
  Plan week = PlanQuery(kT0, kT0 + 7 * kDay, 1000);
  EXPECT_EQ(week.stored_width_s, 600);
  EXPECT_EQ(week.bucket_us, 1200 * kSecond);
  // Four weeks: 2419.2 s wanted: 600 s stored, 2400 s is too fine, 3000 s.
  Plan month = PlanQuery(kT0, kT0 + 28 * kDay, 1000);
  EXPECT_EQ(month.stored_width_s, 600);
  EXPECT_EQ(month.bucket_us % (600 * kSecond), 0);
  // A day at 100 points: 864 s: 600 s stored, 1200 s buckets.
  EXPECT_EQ(PlanQuery(kT0, kT0 + kDay, 100).stored_width_s, 600);
  // A year at 1000 points: 31536 s: the 6 h width.
  EXPECT_EQ(PlanQuery(kT0, kT0 + 365 * kDay, 1000).stored_width_s, 21600);
  // Ten minutes at 1000 points: 0.6 s: finer than any stored width: raw.
  Plan raw = PlanQuery(kT0, kT0 + 600 * kSecond, 1000);
  EXPECT_EQ(raw.stored_width_s, 0);
  // 600 ms buckets, widened by a millisecond: the window is not aligned, so
  // 600 ms would take 1001 of them.
  EXPECT_EQ(raw.bucket_us, 601000);
}

TEST(PlanTest, BucketsAreAlignedAndNeverMoreThanMaxPoints) {
  for (int max_points : {1, 2, 7, 100, 1000, 10000}) {
    for (int64_t length : {kSecond, 37 * kSecond, 3600 * kSecond, kDay,
                           30 * kDay, 400 * kDay}) {
      for (int64_t offset : {int64_t{0}, int64_t{1}, 12345 * kSecond + 7}) {
        const int64_t start = kT0 + offset, end = start + length;
        const Plan plan = PlanQuery(start, end, max_points);
        EXPECT_EQ(plan.read_from_us % plan.bucket_us, 0);
        EXPECT_EQ(plan.read_to_us % plan.bucket_us, 0);
        EXPECT_LE(plan.read_from_us, start);
        EXPECT_GE(plan.read_to_us, end);
        EXPECT_LE((plan.read_to_us - plan.read_from_us) / plan.bucket_us,
                  max_points)
            << max_points << " points over " << length;
        if (plan.stored_width_s > 0) {
          EXPECT_EQ(plan.bucket_us % (plan.stored_width_s * kSecond), 0);
        }
      }
    }
  }
}

}  // namespace
}  // namespace metrics::query
