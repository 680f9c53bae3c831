#include "server/legacy/legacy_batch_conversion.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/proto_time.h"
#include "common/status_macros.h"
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

// Builds the new ingest's batch of one (trial, agent, group) from legacy
// series batches: readings at the same instant and training batch share a
// report (as the old profiler sampled all series of an agent together).
class BatchBuilder {
 public:
  BatchBuilder(int32_t trial_id, std::string agent_id, std::string group) {
    batch_.trial_id = trial_id;
    batch_.agent_id = std::move(agent_id);
    batch_.metric_group = std::move(group);
  }

  void Add(const storage::StoredName& name, const std::string& gpu_uuid,
           absl::Time time, int32_t training_batch, double value) {
    const auto [it, added] =
        series_.try_emplace({name.name, gpu_uuid}, batch_.series.size());
    if (added) batch_.series.push_back({name.name, gpu_uuid, name.unit});
    const uint32_t index = static_cast<uint32_t>(it->second);
    // A report per (instant, training batch), plus another whenever a
    // series repeats in it (two readings of one series at one instant).
    std::vector<size_t>& reports = reports_[{time, training_batch}];
    size_t* target = nullptr;
    for (size_t& r : reports) {
      const std::vector<uint32_t>& used = batch_.reports[r].series;
      if (std::find(used.begin(), used.end(), index) == used.end()) {
        target = &r;
        break;
      }
    }
    if (target == nullptr) {
      reports.push_back(batch_.reports.size());
      storage::Report report;
      report.time_us = absl::ToUnixMicros(time);
      report.batch = training_batch;
      batch_.reports.push_back(std::move(report));
      target = &reports.back();
    }
    storage::Report& report = batch_.reports[*target];
    report.series.push_back(index);
    report.values.push_back(value);
  }

  storage::MetricBatch Take() { return std::move(batch_); }

 private:
  storage::MetricBatch batch_;
  std::map<std::pair<std::string, std::string>, size_t> series_;
  std::map<std::pair<absl::Time, int32_t>, std::vector<size_t>> reports_;
};

// Checks one legacy batch and adds its readings to `builders`.
absl::Status AddLegacyBatch(
    const TrialProfilerMetricsBatch& legacy, const std::string& field,
    std::map<std::tuple<int32_t, std::string, std::string>, BatchBuilder>&
        builders) {
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
  auto [it, added] = builders.try_emplace(
      {labels.trial_id(), labels.agent_id(), *group}, labels.trial_id(),
      labels.agent_id(), *group);
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
    it->second.Add(stored, labels.gpu_uuid(), common::TimeFromProto(t),
                   legacy.batches(i), static_cast<double>(value) * stored.scale);
  }
  return absl::OkStatus();
}

}  // namespace

// The new ingest's batches of a legacy request, each checked as the store
// will check it; split so none passes the per-batch report limit.
absl::StatusOr<std::vector<storage::MetricBatch>> ConvertLegacyRequest(
    const PostTrialProfilerMetricsBatchRequest& request,
    const storage::IngestLimits& limits) {
  std::map<std::tuple<int32_t, std::string, std::string>, BatchBuilder>
      builders;
  for (int i = 0; i < request.batches_size(); ++i) {
    RETURN_IF_ERROR(AddLegacyBatch(request.batches(i),
                                   absl::StrCat("batches[", i, "]"), builders));
  }
  std::vector<storage::MetricBatch> batches;
  for (auto& [key, builder] : builders) {
    storage::MetricBatch whole = builder.Take();
    if (whole.reports.empty()) continue;
    for (size_t from = 0; from < whole.reports.size();
         from += limits.max_reports_per_batch) {
      storage::MetricBatch part;
      part.trial_id = whole.trial_id;
      part.agent_id = whole.agent_id;
      part.metric_group = whole.metric_group;
      part.series = whole.series;
      const size_t to =
          std::min(whole.reports.size(), from + limits.max_reports_per_batch);
      part.reports.assign(std::make_move_iterator(whole.reports.begin() + from),
                          std::make_move_iterator(whole.reports.begin() + to));
      if (absl::Status valid = storage::ValidateBatch(part, limits, absl::Now());
          !valid.ok()) {
        return absl::InvalidArgumentError(absl::StrCat(
            "the readings of trial ", part.trial_id, ", agent ", part.agent_id,
            " (", storage::LegacyTypeOfGroup(part.metric_group),
            "), converted: ", valid.message()));
      }
      batches.push_back(std::move(part));
    }
  }
  return batches;
}

}  // namespace metrics::server
