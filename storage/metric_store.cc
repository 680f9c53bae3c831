#include "storage/metric_store.h"

#include "absl/strings/str_cat.h"

namespace metrics::storage {

absl::string_view TrialStateName(TrialState state) {
  switch (state) {
    case TrialState::kActive:
      return "ACTIVE";
    case TrialState::kCompleted:
      return "COMPLETED";
    case TrialState::kCanceled:
      return "CANCELED";
    case TrialState::kError:
      return "ERROR";
  }
  return "ACTIVE";
}

std::optional<TrialState> ParseTrialState(absl::string_view name) {
  for (TrialState s : {TrialState::kActive, TrialState::kCompleted,
                       TrialState::kCanceled, TrialState::kError}) {
    if (TrialStateName(s) == name) return s;
  }
  return std::nullopt;
}

bool IsTerminal(TrialState state) { return state != TrialState::kActive; }

absl::Status CheckTrialTakesMetrics(absl::string_view field, int32_t trial_id,
                                    TrialState state) {
  if (!IsTerminal(state)) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrCat(
      field, field.empty() ? "" : ": ", "trial ", trial_id, " is ",
      TrialStateName(state), " and takes no more metrics"));
}

size_t MetricBatch::ValueCount() const {
  size_t count = 0;
  for (const Report& report : reports) count += report.values.size();
  return count;
}

}  // namespace metrics::storage
