#include "storage/batch_validation.h"

#include <cmath>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "common/time_format.h"

namespace metrics::storage {

namespace {

absl::Status Invalid(absl::string_view field, absl::string_view why) {
  return absl::InvalidArgumentError(absl::StrCat(field, ": ", why));
}

}  // namespace

absl::Time EarliestReportTime() {
  return absl::FromCivil(absl::CivilSecond(2000, 1, 1, 0, 0, 0),
                         absl::UTCTimeZone());
}

absl::Status ValidateLabel(absl::string_view field, absl::string_view value,
                           size_t max_length, bool allow_empty) {
  if (value.empty()) {
    return allow_empty ? absl::OkStatus() : Invalid(field, "must not be empty");
  }
  if (value.size() > max_length) {
    return Invalid(field, absl::StrCat("is ", value.size(),
                                       " characters long; the limit is ",
                                       max_length));
  }
  for (size_t i = 0; i < value.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(value[i]);
    if (c < 0x20 || c > 0x7e) {
      return Invalid(field, absl::StrCat("has a non-printable character (byte ",
                                         static_cast<int>(c), ") at offset ",
                                         i, "; only printable ASCII is allowed"));
    }
  }
  if (value.front() == ' ' || value.back() == ' ') {
    return Invalid(field, "must not start or end with a space");
  }
  return absl::OkStatus();
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
  if (batch.series.empty()) return Invalid("batch.series", "must not be empty");
  if (batch.series.size() > limits.max_series_per_batch) {
    return Invalid("batch.series",
                   absl::StrCat(batch.series.size(),
                                " series is more than the limit of ",
                                limits.max_series_per_batch));
  }
  absl::flat_hash_set<std::pair<absl::string_view, absl::string_view>> seen;
  for (size_t i = 0; i < batch.series.size(); ++i) {
    const SeriesDeclaration& s = batch.series[i];
    const std::string field = absl::StrCat("batch.series[", i, "]");
    RETURN_IF_ERROR(ValidateLabel(field + ".name", s.name,
                                  limits.max_label_length, false));
    RETURN_IF_ERROR(ValidateLabel(field + ".gpu_uuid", s.gpu_uuid,
                                  limits.max_label_length, true));
    RETURN_IF_ERROR(
        ValidateLabel(field + ".unit", s.unit, limits.max_unit_length, true));
    if (!seen.emplace(s.name, s.gpu_uuid).second) {
      return Invalid(field, absl::StrCat("declares series \"", s.name, "\"",
                                         s.gpu_uuid.empty() ? "" : " of GPU ",
                                         s.gpu_uuid, " a second time"));
    }
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
  std::vector<bool> used(batch.series.size());
  for (size_t r = 0; r < batch.reports.size(); ++r) {
    const Report& report = batch.reports[r];
    const std::string field = absl::StrCat("batch.reports[", r, "]");
    const absl::Time time = absl::FromUnixMicros(report.time_us);
    if (time < EarliestReportTime()) {
      return Invalid(field + ".time",
                     absl::StrCat(common::Rfc3339(time),
                                  " is before 2000-01-01T00:00:00Z"));
    }
    if (time > latest) {
      return Invalid(field + ".time",
                     absl::StrCat(common::Rfc3339(time), " is more than ",
                                  absl::FormatDuration(limits.max_future),
                                  " ahead of the server's clock (",
                                  common::Rfc3339(now), ")"));
    }
    if (report.values.empty()) {
      return Invalid(field + ".values", "must not be empty");
    }
    if (report.series.size() != report.values.size()) {
      return Invalid(field, absl::StrCat("has ", report.series.size(),
                                         " series indexes but ",
                                         report.values.size(),
                                         " values; they must pair up"));
    }
    std::fill(used.begin(), used.end(), false);
    for (size_t v = 0; v < report.values.size(); ++v) {
      const uint32_t index = report.series[v];
      if (index >= batch.series.size()) {
        return Invalid(absl::StrCat(field, ".series[", v, "]"),
                       absl::StrCat("index ", index, " is out of range; the "
                                    "batch declares ",
                                    batch.series.size(), " series"));
      }
      if (used[index]) {
        return Invalid(absl::StrCat(field, ".series[", v, "]"),
                       absl::StrCat("series ", index,
                                    " has a second value in this report"));
      }
      used[index] = true;
      if (!std::isfinite(report.values[v])) {
        return Invalid(
            absl::StrCat(field, ".values[", v, "]"),
            absl::StrCat(std::isnan(report.values[v]) ? "NaN" : "infinity",
                         " is not a finite number (series \"",
                         batch.series[index].name, "\")"));
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace metrics::storage
