#include "storage/metric_store.h"

#include "absl/strings/cord.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "storage/declared_series.h"

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

namespace {
constexpr absl::string_view kRawHorizonPayload = "metrics.raw_horizon_us";
}  // namespace

absl::Status RawExpiredError(int64_t horizon_us) {
  absl::Status status = absl::OutOfRangeError(absl::StrCat(
      "raw samples before ", absl::FormatTime(absl::FromUnixMicros(horizon_us)),
      " have expired (raw retention)"));
  status.SetPayload(kRawHorizonPayload, absl::Cord(absl::StrCat(horizon_us)));
  return status;
}

std::optional<int64_t> RawHorizonOf(const absl::Status& status) {
  if (!absl::IsOutOfRange(status)) return std::nullopt;
  const auto payload = status.GetPayload(kRawHorizonPayload);
  int64_t horizon = 0;
  if (!payload || !absl::SimpleAtoi(std::string(*payload), &horizon)) return std::nullopt;
  return horizon;
}

absl::Status CheckTrialTakesMetrics(absl::string_view field, int32_t trial_id,
                                    TrialState state) {
  if (!IsTerminal(state)) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrCat(
      field, field.empty() ? "" : ": ", "trial ", trial_id, " is ",
      TrialStateName(state), " and takes no more metrics"));
}

absl::Status OlderRunError(int32_t trial_id, int32_t run_id,
                           int32_t newest_run) {
  return absl::FailedPreconditionError(absl::StrCat(
      "metrics.trialRunId: run ", run_id, " of trial ", trial_id,
      " is older than run ", newest_run,
      ", the newest the trial has reported; a restarted trial's earlier "
      "runs report no more"));
}

bool IsProfilingGroup(absl::string_view group) {
  return group == "gpu" || group == "cpu" || group == "memory" ||
         group == "disk" || group == "network";
}

absl::string_view PartitionOfGroup(absl::string_view group) {
  if (group == "training") return "TRAINING";
  if (group == "validation") return "VALIDATION";
  if (IsProfilingGroup(group) || group == kSystemGroup) return "PROFILING";
  return "GENERIC";
}

size_t MetricBatch::ValueCount() const {
  size_t count = 0;
  for (const Report& report : reports) count += report.values.size();
  return count;
}

size_t MetricBatch::SeriesCount() const {
  return series.empty() && declared != nullptr ? declared->size()
                                               : series.size();
}

}  // namespace metrics::storage
