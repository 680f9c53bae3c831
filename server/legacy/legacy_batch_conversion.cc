#include "server/legacy/legacy_batch_conversion.h"

#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/proto_time.h"
#include "common/status_macros.h"
#include "storage/batch_builder.h"
#include "storage/legacy_profiler.h"

namespace metrics::server {

using determined::api::v1::PostTrialProfilerMetricsBatchRequest;
using determined::trial::v1::TrialProfilerMetricLabels;
using determined::trial::v1::TrialProfilerMetricsBatch;

std::optional<std::string> GroupOfLegacyMetricType(
    TrialProfilerMetricLabels::ProfilerMetricType type) {
  return storage::GroupOfLegacyType(
      TrialProfilerMetricLabels::ProfilerMetricType_Name(type));
}

absl::Status CheckLegacyTrialId(absl::string_view field, int32_t trial_id) {
  if (trial_id > 0) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat(field, ": must be a positive trial id"));
}

namespace {

// Checks one legacy batch and adds its readings to `builder`.
absl::Status AddLegacyBatch(const TrialProfilerMetricsBatch& legacy,
                            const std::string& field,
                            storage::BatchBuilder& builder) {
  const TrialProfilerMetricLabels& labels = legacy.labels();
  RETURN_IF_ERROR(CheckLegacyTrialId(field + ".labels.trial_id", labels.trial_id()));
  const std::optional<std::string> group = GroupOfLegacyMetricType(labels.metric_type());
  if (!group.has_value()) {
    return absl::InvalidArgumentError(absl::StrCat(
        field, ".labels.metric_type: must be PROFILER_METRIC_TYPE_SYSTEM, ",
        "PROFILER_METRIC_TYPE_TIMING or PROFILER_METRIC_TYPE_MISC"));
  }
  RETURN_IF_ERROR(storage::ValidateLabel(field + ".labels.name", labels.name(),
                                         storage::kMaxLabelLength, false));
  RETURN_IF_ERROR(storage::ValidateLabel(field + ".labels.agent_id",
                                         labels.agent_id(),
                                         storage::kMaxLabelLength, false));
  RETURN_IF_ERROR(storage::ValidateLabel(field + ".labels.gpu_uuid",
                                         labels.gpu_uuid(),
                                         storage::kMaxLabelLength, true));
  if (legacy.values_size() != legacy.batches_size() ||
      legacy.values_size() != legacy.timestamps_size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        field, ": values, batches and timestamps must have equal lengths (",
        legacy.values_size(), ", ", legacy.batches_size(), " and ",
        legacy.timestamps_size(), ")"));
  }
  const storage::StoredName stored =
      storage::FromLegacy(*group, labels.name());
  const storage::BatchTarget target{labels.trial_id(), labels.agent_id(), *group};
  for (int i = 0; i < legacy.values_size(); ++i) {
    const float value = legacy.values(i);
    if (!std::isfinite(value)) {
      return absl::InvalidArgumentError(
          absl::StrCat(field, ".values[", i, "]: ", value,
                       " is not a finite number"));
    }
    const google::protobuf::Timestamp& t = legacy.timestamps(i);
    if (t.nanos() < 0 || t.nanos() > 999999999) {
      return absl::InvalidArgumentError(
          absl::StrCat(field, ".timestamps[", i, "]: nanos ", t.nanos(),
                       " is out of range"));
    }
    // Labels and the value are checked above: what is left is the time.
    if (absl::Status added = builder.Add(
            target, {stored.name, labels.gpu_uuid(), stored.unit,
                     absl::ToUnixMicros(common::TimeFromProto(t)),
                     legacy.batches(i), static_cast<double>(value) * stored.scale});
        !added.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat(field, ".timestamps[", i, "]: ", added.message()));
    }
  }
  return absl::OkStatus();
}

}  // namespace

// The new ingest's batches of a legacy request: readings of one instant
// and training batch of an agent share a report (as the old profiler
// sampled all series of an agent together).
absl::StatusOr<std::vector<storage::MetricBatch>> ConvertLegacyRequest(
    const PostTrialProfilerMetricsBatchRequest& request,
    const storage::IngestLimits& limits) {
  storage::BatchBuilder builder(limits, absl::Now());
  for (int i = 0; i < request.batches_size(); ++i) {
    RETURN_IF_ERROR(AddLegacyBatch(request.batches(i),
                                   absl::StrCat("batches[", i, "]"), builder));
  }
  return std::move(builder).Take();
}

}  // namespace metrics::server
