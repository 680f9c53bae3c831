// What the platform's ReportTrialMetrics did, for /metrics: reports by kind
// (profiling or generic) and outcome, and the profiling values dropped as
// not finite. The first drop of each agent is logged, once (a bounded set;
// past its bound it is cleared, so an agent may be logged again, never
// unboundedly often).
//
// Thread-safety: thread-safe.
#ifndef METRICS_SERVER_PLATFORM_TRIAL_METRICS_STATISTICS_H_
#define METRICS_SERVER_PLATFORM_TRIAL_METRICS_STATISTICS_H_

#include <array>
#include <atomic>
#include <cstdint>
#include <string>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"

namespace metrics::server {

class TrialMetricsStatistics {
 public:
  static constexpr size_t kMaxLoggedAgents = 10000;

  enum class Kind { kProfiling, kGeneric };
  enum class Outcome { kStored, kDuplicate, kRefused, kFailed };
  static constexpr std::array<Kind, 2> kKinds = {Kind::kProfiling, Kind::kGeneric};
  static constexpr std::array<Outcome, 4> kOutcomes = {
      Outcome::kStored, Outcome::kDuplicate, Outcome::kRefused, Outcome::kFailed};
  static absl::string_view Name(Kind kind);        // "profiling", "generic"
  static absl::string_view Name(Outcome outcome);  // "stored", ...

  void Count(Kind kind, Outcome outcome) { ++reports_[Index(kind, outcome)]; }
  int64_t Reports(Kind kind, Outcome outcome) const {
    return reports_[Index(kind, outcome)];
  }

  // `values` of `agent`'s report in `group` were NaN or infinite and were
  // dropped; logged if this (trial, agent) is new.
  void Dropped(int32_t trial_id, absl::string_view agent, absl::string_view group,
               int64_t values) ABSL_LOCKS_EXCLUDED(mu_);
  int64_t dropped_values() const { return dropped_; }

 private:
  static size_t Index(Kind kind, Outcome outcome) {
    return static_cast<size_t>(kind) * kOutcomes.size() + static_cast<size_t>(outcome);
  }

  std::array<std::atomic<int64_t>, 8> reports_{};
  std::atomic<int64_t> dropped_{0};
  absl::Mutex mu_;
  absl::flat_hash_set<std::pair<int32_t, std::string>> logged_ ABSL_GUARDED_BY(mu_);
};

}  // namespace metrics::server

#endif  // METRICS_SERVER_PLATFORM_TRIAL_METRICS_STATISTICS_H_
