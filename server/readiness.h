// Readiness: whether this metricsd can do its work, which it cannot while
// its database is unreachable (nothing would commit). A thread asks the
// database every second (MetricStore::CheckDatabase, on a connection of its
// own); the server is ready while the last check succeeded and within a few
// seconds, so a check that hangs (a network that drops packets) counts as a
// failure too. /healthz and the gRPC health service report it, so a load
// balancer stops sending here meanwhile. Liveness (/livez) is separate: a
// server whose database is away is alive and gains nothing from a restart.
//
// Thread-safety: thread-safe; `on_change` runs on the probe's thread.
#ifndef METRICS_SERVER_READINESS_H_
#define METRICS_SERVER_READINESS_H_

#include <functional>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "server/readiness_options.h"
#include "storage/metric_store.h"

namespace metrics::server {

class ReadinessProbe {
 public:
  // Starts checking `store` (which must outlive the probe); ready until a
  // check says otherwise, since the server checked its database on start.
  // `on_change(ready, reason)` is called when readiness changes.
  ReadinessProbe(storage::MetricStore* store, ReadinessOptions options,
                 std::function<void(bool, const std::string&)> on_change);
  ~ReadinessProbe();  // stops the thread

  // Whether the database answered lately; else `reason` says what failed,
  // and `code` how: UNAVAILABLE (no answer), FAILED_PRECONDITION (only
  // standbys answer: no primary).
  bool Ready(std::string* reason = nullptr, absl::StatusCode* code = nullptr) const
      ABSL_LOCKS_EXCLUDED(mu_);

 private:
  bool ReadyLocked(std::string* reason, absl::StatusCode* code) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Check() ABSL_LOCKS_EXCLUDED(mu_);  // the checker's loop
  // Calls on_change_ if readiness changed since it last did.
  void Report() ABSL_LOCKS_EXCLUDED(mu_, report_mu_);

  storage::MetricStore* const store_;
  const ReadinessOptions options_;
  const std::function<void(bool, const std::string&)> on_change_;
  mutable absl::Mutex mu_;
  absl::Time last_good_ ABSL_GUARDED_BY(mu_);
  std::string last_failure_ ABSL_GUARDED_BY(mu_);  // of the last check; "" if OK
  absl::StatusCode last_failure_code_ ABSL_GUARDED_BY(mu_) = absl::StatusCode::kOk;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  absl::Mutex report_mu_ ABSL_ACQUIRED_BEFORE(mu_);  // reports in order
  bool reported_ ABSL_GUARDED_BY(report_mu_) = true;
  std::thread checker_;  // asks the database
  std::thread watcher_;  // notices staleness while a check hangs
};

}  // namespace metrics::server

#endif  // METRICS_SERVER_READINESS_H_
