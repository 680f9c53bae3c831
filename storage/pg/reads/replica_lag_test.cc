// ReplicaLag's arithmetic: an idle primary is no lag, a standby that stops
// replaying lags more with each check, one that has replayed nothing lags
// without bound.
#include "storage/pg/reads/read_replica.h"

#include "gtest/gtest.h"

namespace metrics::storage::pg {
namespace {

const absl::Time t0 = absl::FromUnixSeconds(1'790'000'000);

TEST(ReplicaLagTest, AnIdlePrimaryIsNoLag) {
  ReplicaLag lag;
  // The last commit was an hour ago, and the standby has all of it.
  const absl::Time commit = t0 - absl::Hours(1);
  EXPECT_EQ(lag.Observe(t0, true, commit), absl::ZeroDuration());
  EXPECT_EQ(lag.Observe(t0 + absl::Seconds(1), true, commit),
            absl::ZeroDuration());
  // A commit lands just before the next check and is not replayed yet: the
  // standby was current a second ago.
  EXPECT_EQ(lag.Observe(t0 + absl::Seconds(2), false, commit),
            absl::Seconds(1));
  EXPECT_EQ(lag.Observe(t0 + absl::Seconds(3), true, t0 + absl::Seconds(2)),
            absl::ZeroDuration());
}

TEST(ReplicaLagTest, AStandbyThatStopsReplayingLagsMoreEachCheck) {
  ReplicaLag lag;
  EXPECT_EQ(lag.Observe(t0, true, t0), absl::ZeroDuration());
  // Replay stops; the primary commits every second.
  for (int s = 1; s <= 10; ++s) {
    EXPECT_EQ(lag.Observe(t0 + absl::Seconds(s), false, t0), absl::Seconds(s));
  }
  // It replays up to a commit made at t0 + 8 s: 2 s behind.
  EXPECT_EQ(lag.Observe(t0 + absl::Seconds(10), false, t0 + absl::Seconds(8)),
            absl::Seconds(2));
}

TEST(ReplicaLagTest, AStandbyThatHasReplayedNothingLagsWithoutBound) {
  ReplicaLag lag;
  EXPECT_EQ(lag.Observe(t0, false, std::nullopt), absl::InfiniteDuration());
  EXPECT_EQ(lag.Observe(t0 + absl::Seconds(1), true, std::nullopt),
            absl::ZeroDuration());
}

}  // namespace
}  // namespace metrics::storage::pg
