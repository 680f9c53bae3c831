#include "storage/batch_validation.h"

#include <cmath>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "common/vocabulary/label.h"
#include "common/status_macros.h"
#include "common/time_format.h"
#include "storage/declared_series.h"

namespace metrics::storage {

namespace {

absl::Status Invalid(absl::string_view field, absl::string_view why) {
  return absl::InvalidArgumentError(absl::StrCat(field, ": ", why));
}

// Each declaration's labels, and no series declared twice.
absl::Status ValidateSeriesLabels(const std::vector<SeriesDeclaration>& series,
                                  const IngestLimits& limits) {
  absl::flat_hash_set<std::pair<absl::string_view, absl::string_view>> seen;
  for (size_t i = 0; i < series.size(); ++i) {
    const SeriesDeclaration& s = series[i];
    // Field names are built only for an error.
    auto field = [i](absl::string_view member) {
      return absl::StrCat("batch.series[", i, "]", member);
    };
    auto check = [&field](absl::string_view member, absl::string_view value,
                          size_t max_length, bool allow_empty) {
      const std::string problem = signals::LabelProblem(value, max_length, allow_empty);
      return problem.empty() ? absl::OkStatus() : Invalid(field(member), problem);
    };
    RETURN_IF_ERROR(check(".name", s.name, limits.max_label_length, false));
    RETURN_IF_ERROR(check(".gpu_uuid", s.gpu_uuid, limits.max_label_length, true));
    RETURN_IF_ERROR(check(".unit", s.unit, limits.max_unit_length, true));
    if (!seen.emplace(s.name, s.gpu_uuid).second) {
      return Invalid(field(""), absl::StrCat("declares series \"", s.name, "\"",
                                         s.gpu_uuid.empty() ? "" : " of GPU ",
                                         s.gpu_uuid, " a second time"));
    }
  }
  return absl::OkStatus();
}

// The name of the batch's series `index`, for an error.
std::string SeriesName(const MetricBatch& batch, size_t index) {
  return batch.series.empty() ? batch.declared->Unpack()[index].name
                              : batch.series[index].name;
}

}  // namespace

absl::Time EarliestReportTime() {
  return absl::FromUnixSeconds(946684800);  // 2000-01-01T00:00:00Z
}

absl::Status ValidateLabel(absl::string_view field, absl::string_view value,
                           size_t max_length, bool allow_empty) {
  const std::string problem = signals::LabelProblem(value, max_length, allow_empty);
  return problem.empty() ? absl::OkStatus() : Invalid(field, problem);
}

absl::Status ValidateBatch(const MetricBatch& batch,
                           const IngestLimits& limits, absl::Time now) {
  if (batch.trial_id <= 0) {
    return Invalid("batch.trial_id", "must be a positive trial id");
  }
  RETURN_IF_ERROR(ValidateLabel("batch.agent_id", batch.agent_id,
                                limits.max_label_length, false));
  if (!batch.stream_id.empty() && batch.sequence <= 0) {
    return Invalid("batch.sequence", "must be 1 or more");
  }
  if (batch.metric_group != kSystemGroup && batch.metric_group != kTimingGroup &&
      batch.metric_group != kMiscGroup) {
    return Invalid("batch.metric_group",
                   absl::StrCat("\"", batch.metric_group,
                                "\" is not system, timing or misc"));
  }
  if (batch.inventory != nullptr) {
    if (batch.metric_group != kSystemGroup) {
      return Invalid("batch.inventory", "only system batches carry one");
    }
    RETURN_IF_ERROR(ValidateInventory("batch.inventory", *batch.inventory));
  }
  const size_t series_count = batch.SeriesCount();
  if (series_count == 0) return Invalid("batch.series", "must not be empty");
  if (series_count > limits.max_series_per_batch) {
    return Invalid("batch.series",
                   absl::StrCat(series_count,
                                " series is more than the limit of ",
                                limits.max_series_per_batch));
  }
  if (!batch.series.empty()) {
    RETURN_IF_ERROR(ValidateSeriesLabels(batch.series, limits));
  } else if (!batch.declared->labels_valid()) {
    // Shared declarations are checked once (the limits are the server's).
    RETURN_IF_ERROR(ValidateSeriesLabels(batch.declared->Unpack(), limits));
    batch.declared->MarkLabelsValid();
  }
  if (batch.reports.empty()) {
    return Invalid("batch.reports", "must not be empty");
  }
  if (batch.reports.size() > limits.max_reports_per_batch) {
    return Invalid("batch.reports",
                   absl::StrCat(batch.reports.size(),
                                " reports is more than the limit of ",
                                limits.max_reports_per_batch));
  }
  if (const size_t values = batch.ValueCount();
      values > limits.max_values_per_batch) {
    return Invalid("batch.reports",
                   absl::StrCat(values, " values is more than the limit of ",
                                limits.max_values_per_batch));
  }
  const absl::Time latest = now + limits.max_future;
  const absl::Time earliest = EarliestReportTime();
  std::vector<bool> used(series_count);
  for (size_t r = 0; r < batch.reports.size(); ++r) {
    const Report& report = batch.reports[r];
    auto field = [r](absl::string_view member) {
      return absl::StrCat("batch.reports[", r, "]", member);
    };
    const absl::Time time = absl::FromUnixMicros(report.time_us);
    if (time < earliest) {
      return Invalid(field(".time"),
                     absl::StrCat(common::Rfc3339(time),
                                  " is before 2000-01-01T00:00:00Z"));
    }
    if (time > latest) {
      return Invalid(field(".time"),
                     absl::StrCat(common::Rfc3339(time), " is more than ",
                                  absl::FormatDuration(limits.max_future),
                                  " ahead of the server's clock (",
                                  common::Rfc3339(now), ")"));
    }
    if (report.values.empty()) {
      return Invalid(field(".values"), "must not be empty");
    }
    if (report.series.empty()) {
      return Invalid(field(""),
                     absl::StrCat("has ", report.values.size(),
                                  " values and no series indexes; without them "
                                  "it must have one value for each of the ",
                                  series_count, " declared series"));
    }
    if (report.series.size() != report.values.size()) {
      return Invalid(field(""), absl::StrCat("has ", report.series.size(),
                                         " series indexes but ",
                                         report.values.size(),
                                         " values; they must pair up"));
    }
    std::fill(used.begin(), used.end(), false);
    for (size_t v = 0; v < report.values.size(); ++v) {
      const uint32_t index = report.series[v];
      if (index >= series_count) {
        return Invalid(field(absl::StrCat(".series[", v, "]")),
                       absl::StrCat("index ", index, " is out of range; the "
                                    "batch declares ",
                                    series_count, " series"));
      }
      if (used[index]) {
        return Invalid(field(absl::StrCat(".series[", v, "]")),
                       absl::StrCat("series ", index,
                                    " has a second value in this report"));
      }
      used[index] = true;
      if (!std::isfinite(report.values[v])) {
        return Invalid(
            field(absl::StrCat(".values[", v, "]")),
            absl::StrCat(std::isnan(report.values[v]) ? "NaN" : "infinity",
                         " is not a finite number (series \"",
                         SeriesName(batch, index), "\")"));
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace metrics::storage
