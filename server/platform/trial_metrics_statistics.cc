#include "server/platform/trial_metrics_statistics.h"

#include "common/logging.h"

namespace metrics::server {

absl::string_view TrialMetricsStatistics::Name(Kind kind) {
  return kind == Kind::kProfiling ? "profiling" : "generic";
}

absl::string_view TrialMetricsStatistics::Name(Outcome outcome) {
  switch (outcome) {
    case Outcome::kStored:
      return "stored";
    case Outcome::kDuplicate:
      return "duplicate";
    case Outcome::kRefused:
      return "refused";
    case Outcome::kFailed:
      return "failed";
  }
  return "failed";
}

void TrialMetricsStatistics::Dropped(int32_t trial_id, absl::string_view agent,
                                     absl::string_view group, int64_t values) {
  dropped_ += values;
  bool first;
  {
    absl::MutexLock lock(&mu_);
    if (logged_.size() >= kMaxLoggedAgents) logged_.clear();
    first = logged_.emplace(trial_id, std::string(agent)).second;
  }
  if (first) {
    common::LogWarning("ReportTrialMetrics: trial ", trial_id, ", agent ", agent,
                       " sent ", values, " NaN or infinite value(s) in group ", group,
                       "; they are dropped (counted in "
                       "metricsd_trial_metrics_dropped_values_total; logged once "
                       "per agent)");
  }
}

}  // namespace metrics::server
