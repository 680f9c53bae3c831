#include "storage/batch_builder.h"

#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/time_format.h"

namespace metrics::storage {

namespace {

absl::Status Refused(absl::string_view why) {
  return absl::InvalidArgumentError(why);
}

}  // namespace

absl::StatusOr<size_t> BatchBuilder::PendingOf(const BatchTarget& target) {
  TargetKey key{target.trial_id, std::string(target.agent_id),
                std::string(target.metric_group)};
  if (auto it = pending_of_.find(key); it != pending_of_.end()) {
    return it->second;
  }
  if (target.trial_id <= 0) {
    return Refused(absl::StrCat("trial ", target.trial_id,
                                " is not a positive trial id"));
  }
  if (target.metric_group != kSystemGroup &&
      target.metric_group != kTimingGroup && target.metric_group != kMiscGroup) {
    return Refused(absl::StrCat("metric group \"", target.metric_group,
                                "\" is not system, timing or misc"));
  }
  if (absl::Status s = ValidateLabel("agent id", target.agent_id,
                                  limits_.max_label_length, false);
      !s.ok()) {
    return s;
  }
  const size_t index = pending_.size();
  Pending& p = pending_.emplace_back();
  p.whole.trial_id = target.trial_id;
  p.whole.agent_id = std::string(target.agent_id);
  p.whole.metric_group = std::string(target.metric_group);
  pending_of_.emplace(std::move(key), index);
  return index;
}

absl::StatusOr<uint32_t> BatchBuilder::SeriesOf(Pending& p,
                                                const BuiltValue& value) {
  SeriesKey key{std::string(value.name), std::string(value.gpu_uuid)};
  if (auto it = p.series_of.find(key); it != p.series_of.end()) {
    const SeriesDeclaration& declared = p.whole.series[it->second];
    if (declared.unit != value.unit) {
      // The other unit is not quoted: it may be no valid label.
      return Refused(absl::StrCat("series \"", value.name,
                                  "\" cannot have two units (it has \"",
                                  declared.unit, "\")"));
    }
    return it->second;
  }
  for (const auto& [what, text, max, allow_empty] :
       {std::tuple<absl::string_view, absl::string_view, size_t, bool>(
            "series name", value.name, limits_.max_label_length, false),
        {"GPU UUID", value.gpu_uuid, limits_.max_label_length, true},
        {"unit", value.unit, limits_.max_unit_length, true}}) {
    if (absl::Status s = ValidateLabel(what, text, max, allow_empty); !s.ok()) {
      // Which series, where the label is not the name itself.
      if (what == "series name") return s;
      return Refused(absl::StrCat(s.message(), " (series \"", value.name,
                                  "\")"));
    }
  }
  const auto index = static_cast<uint32_t>(p.whole.series.size());
  p.whole.series.push_back({std::string(value.name),
                            std::string(value.gpu_uuid),
                            std::string(value.unit)});
  p.series_of.emplace(std::move(key), index);
  return index;
}

absl::Status BatchBuilder::Add(const BatchTarget& target,
                               const BuiltValue& value) {
  // Labels first: the messages below quote the name, once it is valid.
  size_t pending;
  uint32_t series;
  if (last_ && last_->trial_id == target.trial_id &&
      last_->agent_id == target.agent_id &&
      last_->metric_group == target.metric_group &&
      last_->name == value.name && last_->gpu_uuid == value.gpu_uuid &&
      pending_[last_->pending].whole.series[last_->series].unit == value.unit) {
    pending = last_->pending;
    series = last_->series;
  } else {
    absl::StatusOr<size_t> p = PendingOf(target);
    if (!p.ok()) return p.status();
    absl::StatusOr<uint32_t> s = SeriesOf(pending_[*p], value);
    if (!s.ok()) return s.status();
    pending = *p;
    series = *s;
    last_ = Last{target.trial_id,           std::string(target.agent_id),
                 std::string(target.metric_group), std::string(value.name),
                 std::string(value.gpu_uuid), pending, series};
  }
  if (!std::isfinite(value.value)) {
    return Refused(absl::StrCat(std::isnan(value.value) ? "NaN" : "infinity",
                                " is not a finite number (series \"",
                                value.name, "\")"));
  }
  const absl::Time time = absl::FromUnixMicros(value.time_us);
  if (time < EarliestReportTime()) {
    return Refused(absl::StrCat("time ", common::Rfc3339(time),
                                " is before 2000-01-01T00:00:00Z"));
  }
  if (time > latest_) {
    return Refused(absl::StrCat(
        "time ", common::Rfc3339(time), " is more than ",
        absl::FormatDuration(limits_.max_future),
        " ahead of the server's clock"));
  }
  Pending& p = pending_[pending];
  // The first report of this instant without the series, or a new one.
  std::vector<size_t>& reports =
      p.reports_at[InstantKey{value.time_us, value.training_batch}];
  size_t report = p.whole.reports.size();
  for (size_t r : reports) {
    if (!p.filled.contains(uint64_t{r} << 32 | series)) {
      report = r;
      break;
    }
  }
  if (report == p.whole.reports.size()) {
    Report& added = p.whole.reports.emplace_back();
    added.time_us = value.time_us;
    added.batch = value.training_batch;
    reports.push_back(report);
  }
  p.filled.insert(uint64_t{report} << 32 | series);
  Report& r = p.whole.reports[report];
  r.series.push_back(series);
  r.values.push_back(value.value);
  ++values_;
  return absl::OkStatus();
}

std::vector<MetricBatch> BatchBuilder::Split(MetricBatch whole) const {
  std::vector<MetricBatch> parts;
  // Where each of `whole`'s series is in the part being filled.
  std::vector<int64_t> in_part(whole.series.size(), -1);
  size_t part_values = 0;
  auto start_part = [&] {
    MetricBatch& part = parts.emplace_back();
    part.trial_id = whole.trial_id;
    part.agent_id = whole.agent_id;
    part.metric_group = whole.metric_group;
    std::fill(in_part.begin(), in_part.end(), -1);
    part_values = 0;
  };
  start_part();
  for (Report& report : whole.reports) {
    if (parts.back().reports.size() >= limits_.max_reports_per_batch) {
      start_part();
    }
    Report* into = nullptr;
    for (size_t v = 0; v < report.values.size(); ++v) {
      const uint32_t s = report.series[v];
      const bool declare = in_part[s] < 0;
      if ((declare &&
           parts.back().series.size() >= limits_.max_series_per_batch) ||
          part_values >= limits_.max_values_per_batch) {
        start_part();
        into = nullptr;
      }
      MetricBatch& part = parts.back();
      if (in_part[s] < 0) {
        in_part[s] = static_cast<int64_t>(part.series.size());
        part.series.push_back(whole.series[s]);
      }
      if (into == nullptr) {
        into = &part.reports.emplace_back();
        into->time_us = report.time_us;
        into->batch = report.batch;
      }
      into->series.push_back(static_cast<uint32_t>(in_part[s]));
      into->values.push_back(report.values[v]);
      ++part_values;
    }
  }
  if (parts.back().reports.empty()) parts.pop_back();
  return parts;
}

std::vector<MetricBatch> BatchBuilder::Take() && {
  std::vector<MetricBatch> batches;
  for (Pending& p : pending_) {
    if (p.whole.reports.empty()) continue;
    for (MetricBatch& part : Split(std::move(p.whole))) {
      batches.push_back(std::move(part));
    }
  }
  return batches;
}

}  // namespace metrics::storage
