#include "client/backoff.h"

#include "gtest/gtest.h"

namespace metrics::client {
namespace {

TEST(BackoffTest, GrowsToTheCapWithinJitterAndResets) {
  Backoff b(absl::Milliseconds(100), absl::Seconds(1), 2.0, 0.2);
  const double expected_ms[] = {100, 200, 400, 800, 1000, 1000};
  for (double ms : expected_ms) {
    const double got = absl::ToDoubleMilliseconds(b.Next());
    EXPECT_GE(got, ms * 0.8);
    EXPECT_LE(got, ms * 1.2);
  }
  b.Reset();
  EXPECT_LE(absl::ToDoubleMilliseconds(b.Next()), 120);
}

TEST(BackoffTest, JitterSpreadsDelays) {
  Backoff a(absl::Seconds(1), absl::Seconds(1), 1.0, 0.2);
  double lowest = 1e9, highest = 0;
  for (int i = 0; i < 200; ++i) {
    const double d = absl::ToDoubleSeconds(a.Next());
    lowest = std::min(lowest, d);
    highest = std::max(highest, d);
  }
  // 200 draws from [0.8, 1.2] spread over most of the range.
  EXPECT_LT(lowest, 0.9);
  EXPECT_GT(highest, 1.1);
}

}  // namespace
}  // namespace metrics::client
