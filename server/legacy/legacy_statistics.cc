#include "server/legacy/legacy_statistics.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "common/logging.h"

namespace metrics::server {

namespace {

// "ipv4:10.0.0.5:41234" → "10.0.0.5", "ipv6:[::1]:5000" → "::1"; an address
// without a port is kept.
absl::string_view HostOf(absl::string_view peer) {
  for (absl::string_view scheme : {"ipv4:", "ipv6:"}) {
    if (!absl::ConsumePrefix(&peer, scheme)) continue;
    if (const size_t colon = peer.rfind(':'); colon != absl::string_view::npos) {
      peer = peer.substr(0, colon);
    }
    absl::ConsumePrefix(&peer, "[");
    absl::ConsumeSuffix(&peer, "]");
  }
  return peer;
}

}  // namespace

void LegacyStatistics::Record(absl::string_view method, absl::string_view peer,
                         absl::string_view successor) {
  const absl::string_view client = HostOf(peer);
  bool first = false;
  {
    absl::MutexLock lock(&mu_);
    ++calls_[std::string(method)];
    if (logged_.size() >= kMaxLoggedClients) logged_.clear();
    first = logged_.insert(absl::StrCat(method, " ", client)).second;
  }
  if (first) {
    common::LogWarning("deprecated API: ", client, " called ", method,
                       "; its successor is ", successor);
  }
}

std::map<std::string, int64_t> LegacyStatistics::Calls() const {
  absl::MutexLock lock(&mu_);
  return calls_;
}

}  // namespace metrics::server
