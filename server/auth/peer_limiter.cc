#include "server/auth/peer_limiter.h"

#include <arpa/inet.h>

#include <algorithm>
#include <cstring>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/strip.h"

namespace metrics::server {

PeerLimiter::PeerLimiter(PeerLimiterOptions options)
    : options_(std::move(options)) {}

std::string PeerLimiter::KeyOf(absl::string_view address) {
  std::string text(address);
  if (text.size() > 2 && text.front() == '[' && text.back() == ']') {
    text = text.substr(1, text.size() - 2);
  }
  unsigned char bytes[16];
  if (::inet_pton(AF_INET6, text.c_str(), bytes) != 1) return text;
  static constexpr unsigned char kMapped[12] = {0, 0, 0, 0, 0, 0,
                                                0, 0, 0, 0, 0xff, 0xff};
  char out[INET6_ADDRSTRLEN];
  if (std::memcmp(bytes, kMapped, sizeof(kMapped)) == 0) {
    return ::inet_ntop(AF_INET, bytes + 12, out, sizeof(out));
  }
  static constexpr unsigned char kLoopback[16] = {0, 0, 0, 0, 0, 0, 0, 0,
                                                  0, 0, 0, 0, 0, 0, 0, 1};
  if (std::memcmp(bytes, kLoopback, sizeof(kLoopback)) == 0) return "::1";
  std::memset(bytes + 8, 0, 8);
  return absl::StrCat(::inet_ntop(AF_INET6, bytes, out, sizeof(out)), "/64");
}

std::string PeerLimiter::AddressOfGrpcPeer(absl::string_view peer) {
  absl::string_view rest = peer;
  if (absl::ConsumePrefix(&rest, "ipv4:")) {
    return std::string(rest.substr(0, rest.rfind(':')));
  }
  if (!absl::ConsumePrefix(&rest, "ipv6:")) return std::string(peer);
  const std::string decoded =
      absl::StrReplaceAll(rest, {{"%5B", "["}, {"%5D", "]"}, {"%25", "%"}});
  if (!decoded.empty() && decoded.front() == '[') {
    const size_t end = decoded.find(']');
    return decoded.substr(1, end == std::string::npos ? std::string::npos : end - 1);
  }
  return decoded.substr(0, decoded.rfind(':'));
}

void PeerLimiter::Refill(Bucket& bucket, absl::Time now) const {
  if (now <= bucket.updated) return;
  const double earned = absl::FDivDuration(now - bucket.updated, options_.refill);
  bucket.left = std::min<double>(options_.burst, bucket.left + earned);
  bucket.updated = now;
}

bool PeerLimiter::Exempt(const std::string& key) const {
  return options_.burst <= 0 ||
         std::find(options_.exempt.begin(), options_.exempt.end(), key) !=
             options_.exempt.end();
}

absl::Duration PeerLimiter::Wait(absl::string_view peer) {
  const std::string key = KeyOf(peer);
  if (Exempt(key)) return absl::ZeroDuration();
  const absl::Time now = options_.clock();
  absl::MutexLock lock(&mu_);
  auto it = buckets_.find(key);
  if (it == buckets_.end()) return absl::ZeroDuration();
  Refill(it->second, now);
  if (it->second.left >= 1) return absl::ZeroDuration();
  return options_.refill * (1 - it->second.left);
}

bool PeerLimiter::Failed(absl::string_view peer) {
  const std::string key = KeyOf(peer);
  if (Exempt(key)) return false;
  const absl::Time now = options_.clock();
  absl::MutexLock lock(&mu_);
  auto it = buckets_.find(key);
  if (it == buckets_.end()) {
    if (buckets_.size() >= options_.max_peers) MakeRoomLocked(now);
    it = buckets_.emplace(key, Bucket{static_cast<double>(options_.burst), now})
             .first;
  }
  Bucket& bucket = it->second;
  Refill(bucket, now);
  bucket.left = std::max(0.0, bucket.left - 1);
  if (bucket.left >= 1 || now - bucket.reported < options_.report_every) {
    return false;
  }
  bucket.reported = now;
  return true;
}

void PeerLimiter::MakeRoomLocked(absl::Time now) {
  // A full bucket says nothing a new one would not: forget those first.
  for (auto it = buckets_.begin(); it != buckets_.end();) {
    Refill(it->second, now);
    if (it->second.left >= options_.burst) {
      buckets_.erase(it++);
    } else {
      ++it;
    }
  }
  if (buckets_.size() >= options_.max_peers) buckets_.clear();
}

size_t PeerLimiter::peers() const {
  absl::MutexLock lock(&mu_);
  return buckets_.size();
}

}  // namespace metrics::server
