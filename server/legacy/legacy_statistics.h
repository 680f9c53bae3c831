// Who still calls the deprecated legacy profiler API: a call counter per
// method (for /metrics), and one log line per client host and method, the
// first time that host calls it, rather than one per call or connection
// (ports are dropped: every HTTP connection has a new one). The set of
// logged pairs is bounded; past the bound it is cleared, so a client may be
// logged again, never unboundedly often.
//
// Thread-safety: thread-safe.
#ifndef METRICS_SERVER_LEGACY_LEGACY_STATISTICS_H_
#define METRICS_SERVER_LEGACY_LEGACY_STATISTICS_H_

#include <cstdint>
#include <map>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"

namespace metrics::server {

class LegacyStatistics {
 public:
  static constexpr size_t kMaxLoggedClients = 10000;

  // Counts a call of `method` from `peer` (an IP address, or a gRPC peer
  // such as "ipv4:10.0.0.5:41234"); logs it if this host and method are new.
  void Record(absl::string_view method, absl::string_view peer,
              absl::string_view successor) ABSL_LOCKS_EXCLUDED(mu_);

  // Calls per method so far.
  std::map<std::string, int64_t> Calls() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  mutable absl::Mutex mu_;
  std::map<std::string, int64_t> calls_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_set<std::string> logged_ ABSL_GUARDED_BY(mu_);
};

}  // namespace metrics::server

#endif  // METRICS_SERVER_LEGACY_LEGACY_STATISTICS_H_
