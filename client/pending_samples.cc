#include "client/pending_samples.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace metrics::client {

std::optional<uint32_t> PendingSamples::Intern(absl::string_view name,
                                               absl::string_view gpu_uuid,
                                               absl::string_view unit,
                                               int max_series) {
  // The separator cannot occur in a valid name, GPU or unit (printable).
  key_scratch_.clear();
  absl::StrAppend(&key_scratch_, name, "\x1f", gpu_uuid, "\x1f", unit);
  if (auto it = series_numbers_.find(key_scratch_);
      it != series_numbers_.end()) {
    return it->second;
  }
  if (static_cast<int>(series_.size()) >= max_series) return std::nullopt;
  const auto number = static_cast<uint32_t>(series_.size());
  series_.push_back(
      {std::string(name), std::string(gpu_uuid), std::string(unit)});
  series_numbers_.emplace(key_scratch_, number);
  local_index_.push_back(-1);
  return number;
}

void PendingSamples::Push(absl::Time time, uint32_t series, double value,
                          absl::Time now) {
  entries_.push_back({absl::ToUnixNanos(time), series, value});
  if (!recorded_.empty() && recorded_.back().second == now) {
    ++recorded_.back().first;
  } else {
    recorded_.emplace_back(1, now);
  }
}

void PendingSamples::DropOldest(int64_t n) {
  n = std::min(n, size());
  entries_.erase(entries_.begin(), entries_.begin() + n);
  while (n > 0) {
    auto& [count, time] = recorded_.front();
    const int64_t used = std::min(n, count);
    count -= used;
    n -= used;
    if (count == 0) recorded_.pop_front();
  }
}

absl::Time PendingSamples::oldest_recorded() const {
  return recorded_.empty() ? absl::InfiniteFuture() : recorded_.front().second;
}

v1::SystemMetricsBatch PendingSamples::TakeBatch(int max_samples,
                                                 const std::string& agent_id) {
  v1::SystemMetricsBatch batch;
  batch.set_agent_id(agent_id);
  const int64_t n = std::min<int64_t>(max_samples, size());
  std::vector<uint32_t> used;  // global series numbers, in declaration order
  // The report each declared series last went into, to start a new report
  // when a series repeats at the same instant.
  std::vector<int> last_report;
  v1::SystemMetricsReport* report = nullptr;
  int64_t report_time = 0;
  for (int64_t i = 0; i < n; ++i) {
    const Entry& e = entries_[i];
    int32_t& local = local_index_[e.series];
    if (local < 0) {
      local = static_cast<int32_t>(used.size());
      used.push_back(e.series);
      last_report.push_back(-1);
      const Series& s = series_[e.series];
      v1::SeriesDeclaration* d = batch.add_series();
      d->set_name(s.name);
      d->set_gpu_uuid(s.gpu_uuid);
      d->set_unit(s.unit);
    }
    if (report == nullptr || e.time_ns != report_time ||
        last_report[local] == batch.reports_size() - 1) {
      report = batch.add_reports();
      report_time = e.time_ns;
      report->mutable_time()->set_seconds(
          e.time_ns >= 0 ? e.time_ns / 1000000000
                         : -((-e.time_ns + 999999999) / 1000000000));
      report->mutable_time()->set_nanos(
          static_cast<int32_t>(e.time_ns - report->time().seconds() * 1000000000));
    }
    last_report[local] = batch.reports_size() - 1;
    report->add_series(static_cast<uint32_t>(local));
    report->add_values(e.value);
  }
  // A report with every declared series in order goes without its
  // indexes (the usual report of an agent): a byte a value less to send,
  // and less to size, write and parse on both sides.
  for (v1::SystemMetricsReport& r : *batch.mutable_reports()) {
    bool in_order = r.series_size() == batch.series_size();
    for (int i = 0; in_order && i < r.series_size(); ++i) {
      in_order = r.series(i) == static_cast<uint32_t>(i);
    }
    if (in_order) r.clear_series();
  }
  for (uint32_t s : used) local_index_[s] = -1;
  DropOldest(n);
  return batch;
}

}  // namespace metrics::client
