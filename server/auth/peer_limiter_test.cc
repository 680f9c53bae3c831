// The per-peer limit of failed authentications: a burst, then one attempt
// per refill; exempt peers; IPv6 counted by /64 and IPv4-mapped addresses
// as IPv4; a bounded table.
#include "server/auth/peer_limiter.h"

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace metrics::server {
namespace {

class PeerLimiterTest : public ::testing::Test {
 protected:
  PeerLimiterOptions Options() {
    PeerLimiterOptions options;
    options.burst = 3;
    options.refill = absl::Seconds(1);
    options.clock = [this] { return now_; };
    return options;
  }

  absl::Time now_ = absl::FromUnixSeconds(1700000000);
};

TEST_F(PeerLimiterTest, ABurstThenOneAttemptPerRefill) {
  PeerLimiter limiter(Options());
  EXPECT_EQ(limiter.Wait("10.0.0.1"), absl::ZeroDuration());
  EXPECT_FALSE(limiter.Failed("10.0.0.1"));
  EXPECT_FALSE(limiter.Failed("10.0.0.1"));
  EXPECT_EQ(limiter.Wait("10.0.0.1"), absl::ZeroDuration());
  EXPECT_TRUE(limiter.Failed("10.0.0.1"));  // the last of the burst: said once
  EXPECT_EQ(limiter.Wait("10.0.0.1"), absl::Seconds(1));
  EXPECT_EQ(limiter.Wait("10.0.0.2"), absl::ZeroDuration());
  now_ += absl::Milliseconds(400);
  EXPECT_EQ(limiter.Wait("10.0.0.1"), absl::Milliseconds(600));
  now_ += absl::Milliseconds(600);
  EXPECT_EQ(limiter.Wait("10.0.0.1"), absl::ZeroDuration());
  EXPECT_FALSE(limiter.Failed("10.0.0.1"));  // limited again, not said again
  EXPECT_GT(limiter.Wait("10.0.0.1"), absl::ZeroDuration());
  // After the whole burst's time, the whole burst.
  now_ += absl::Seconds(3);
  for (int i = 0; i < 2; ++i) EXPECT_FALSE(limiter.Failed("10.0.0.1"));
  EXPECT_EQ(limiter.Wait("10.0.0.1"), absl::ZeroDuration());
  // Once the report period passed, a new run-out is said again.
  now_ += absl::Minutes(1);
  for (int i = 0; i < 2; ++i) EXPECT_FALSE(limiter.Failed("10.0.0.1"));
  EXPECT_TRUE(limiter.Failed("10.0.0.1"));
}

TEST_F(PeerLimiterTest, ExemptPeersAndNoLimitAtZero) {
  PeerLimiterOptions options = Options();
  options.exempt = {"127.0.0.1", "2001:db8:1:2::/64"};
  PeerLimiter limiter(options);
  for (int i = 0; i < 10; ++i) {
    limiter.Failed("127.0.0.1");
    limiter.Failed("2001:db8:1:2::77");
  }
  EXPECT_EQ(limiter.Wait("127.0.0.1"), absl::ZeroDuration());
  EXPECT_EQ(limiter.Wait("2001:db8:1:2:aaaa::1"), absl::ZeroDuration());
  EXPECT_EQ(limiter.peers(), 0u);
  options.burst = 0;
  PeerLimiter off(options);
  for (int i = 0; i < 10; ++i) off.Failed("10.0.0.1");
  EXPECT_EQ(off.Wait("10.0.0.1"), absl::ZeroDuration());
}

TEST_F(PeerLimiterTest, AddressesAreCountedByHostOrSlash64) {
  EXPECT_EQ(PeerLimiter::KeyOf("10.1.2.3"), "10.1.2.3");
  EXPECT_EQ(PeerLimiter::KeyOf("::ffff:10.1.2.3"), "10.1.2.3");
  EXPECT_EQ(PeerLimiter::KeyOf("::1"), "::1");
  EXPECT_EQ(PeerLimiter::KeyOf("[::1]"), "::1");
  EXPECT_EQ(PeerLimiter::KeyOf("2001:db8:1:2:3:4:5:6"), "2001:db8:1:2::/64");
  EXPECT_EQ(PeerLimiter::KeyOf("unknown"), "unknown");
  // Rotating the address inside one /64 does not earn a new burst.
  PeerLimiter limiter(Options());
  for (int i = 0; i < 3; ++i) {
    limiter.Failed(absl::StrCat("2001:db8:1:2::", i + 1));
  }
  EXPECT_GT(limiter.Wait("2001:db8:1:2::99"), absl::ZeroDuration());
  EXPECT_EQ(limiter.Wait("2001:db8:1:3::1"), absl::ZeroDuration());
}

TEST_F(PeerLimiterTest, GrpcPeersLoseTheirPorts) {
  EXPECT_EQ(PeerLimiter::AddressOfGrpcPeer("ipv4:10.1.2.3:50051"), "10.1.2.3");
  EXPECT_EQ(PeerLimiter::AddressOfGrpcPeer("ipv6:[::1]:50051"), "::1");
  EXPECT_EQ(PeerLimiter::AddressOfGrpcPeer("ipv6:%5B2001:db8::7%5D:50051"),
            "2001:db8::7");
  EXPECT_EQ(PeerLimiter::AddressOfGrpcPeer("ipv6:%5Bfe80::1%25eth0%5D:9"),
            "fe80::1%eth0");
  EXPECT_EQ(PeerLimiter::AddressOfGrpcPeer("unix:/tmp/socket"), "unix:/tmp/socket");
}

TEST_F(PeerLimiterTest, TheTableIsBounded) {
  PeerLimiterOptions options = Options();
  options.max_peers = 100;
  PeerLimiter limiter(options);
  limiter.Failed("192.168.0.1");
  limiter.Failed("192.168.0.1");
  limiter.Failed("192.168.0.1");  // limited
  for (int i = 0; i < 1000; ++i) {
    limiter.Failed(absl::StrCat("10.0.", i / 200, ".", i % 200));
    EXPECT_LE(limiter.peers(), 100u);
    now_ += absl::Seconds(5);  // each refilled by the time room is made
  }
}

}  // namespace
}  // namespace metrics::server
