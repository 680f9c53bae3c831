// Limits failed authentications per peer address, as nginx's limit_req
// limits requests: each peer has a bucket of `burst` failures that refills
// at one per `refill`; a failure takes one, and a peer whose bucket is
// empty is limited until the next one comes back. Only failures count, so
// a peer that authenticates is never slowed by its own successes, and the
// authenticator still lets a limited peer's known-good tokens through.
//
// Peers are addresses without their port; IPv6 peers are taken by their
// /64 (one host's usual allocation, so an attacker cannot step past the
// limit by rotating the address inside it), IPv4-mapped ones as IPv4.
// The table is bounded: past `max_peers`, peers whose buckets are full are
// forgotten first, then all.
//
// Thread-safety: thread-safe.
#ifndef METRICS_SERVER_AUTH_PEER_LIMITER_H_
#define METRICS_SERVER_AUTH_PEER_LIMITER_H_

#include <functional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace metrics::server {

struct PeerLimiterOptions {
  // Failed authentications a peer may make in a row before it is limited;
  // 0 turns the limit off.
  int burst = 20;
  // One more failure is allowed per `refill` (so a limited peer that keeps
  // failing gets one attempt a second by default).
  absl::Duration refill = absl::Seconds(1);
  // Peers never limited (their keys, as KeyOf makes them: "127.0.0.1",
  // "::1", "2001:db8::/64"). Loopback is not exempt unless named.
  std::vector<std::string> exempt;
  // Peers remembered at most (about 100 bytes each).
  size_t max_peers = 100000;
  // How often, at most, Failed reports that one peer is being limited.
  absl::Duration report_every = absl::Minutes(1);
  std::function<absl::Time()> clock = [] { return absl::Now(); };
};

class PeerLimiter {
 public:
  explicit PeerLimiter(PeerLimiterOptions options);

  // How long `peer` must wait before its next attempt is heard: zero when
  // it is not limited.
  absl::Duration Wait(absl::string_view peer) ABSL_LOCKS_EXCLUDED(mu_);

  // Counts a failed authentication of `peer`. True when the caller should
  // log that the peer is being limited: it just ran out, and this was not
  // reported in the last `report_every`.
  bool Failed(absl::string_view peer) ABSL_LOCKS_EXCLUDED(mu_);

  // Peers remembered now (for tests).
  size_t peers() const ABSL_LOCKS_EXCLUDED(mu_);

  // The table's key of an address: IPv4 as it is, IPv6 as its /64 ("::1"
  // stays itself), an IPv4-mapped IPv6 address as IPv4; text that is not
  // an address, as it is.
  static std::string KeyOf(absl::string_view address);

  // The address of a gRPC peer ("ipv4:10.0.0.1:5000", "ipv6:[::1]:5000",
  // or percent-encoded "ipv6:%5B::1%5D:5000"), without its port; other
  // peers (a Unix socket's) as they are.
  static std::string AddressOfGrpcPeer(absl::string_view peer);

 private:
  struct Bucket {
    double left;  // failures it may still make
    absl::Time updated;
    absl::Time reported = absl::InfinitePast();
  };

  // `bucket` refilled up to now.
  void Refill(Bucket& bucket, absl::Time now) const;
  bool Exempt(const std::string& key) const;
  void MakeRoomLocked(absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const PeerLimiterOptions options_;
  mutable absl::Mutex mu_;
  absl::flat_hash_map<std::string, Bucket> buckets_ ABSL_GUARDED_BY(mu_);
};

}  // namespace metrics::server

#endif  // METRICS_SERVER_AUTH_PEER_LIMITER_H_
