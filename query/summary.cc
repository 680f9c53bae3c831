#include "query/summary.h"

#include <algorithm>
#include <map>
#include <set>
#include <tuple>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "query/plan.h"
#include "storage/rollup.h"

namespace metrics::query {

namespace {

using storage::RollupStats;
using storage::SeriesInfo;

constexpr int64_t kFinestStoredUs =
    int64_t{storage::kRollupWidthsSeconds[0]} * 1000000;

// Past any run (and far from overflowing microseconds since the epoch).
constexpr absl::Duration kLongestOffset = absl::Hours(24 * 366 * 100);

absl::Status Validate(const SummaryRequest& r, int max_max_points) {
  if (r.trial_ids.empty()) {
    return absl::InvalidArgumentError("trial_id: name at least one trial");
  }
  if (r.trial_ids.size() > static_cast<size_t>(kMaxSummaryTrials)) {
    return absl::InvalidArgumentError(
        absl::StrCat("trial_id: ", r.trial_ids.size(), " trials; at most ",
                     kMaxSummaryTrials, " at once"));
  }
  absl::flat_hash_set<int32_t> seen;
  for (size_t i = 0; i < r.trial_ids.size(); ++i) {
    const int32_t id = r.trial_ids[i];
    if (id <= 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("trial_id[", i, "]: ", id, " is not a trial id"));
    }
    if (!seen.insert(id).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("trial_id[", i, "]: trial ", id, " is named twice"));
    }
  }
  if (r.relative && (r.start || r.end)) {
    return absl::InvalidArgumentError(absl::StrCat(
        r.start ? "start" : "end",
        ": a wall-clock bound does not mix with relative time (use the offsets)"));
  }
  if (!r.relative && (r.offset_start || r.offset_end)) {
    return absl::InvalidArgumentError(absl::StrCat(
        r.offset_start ? "offset_start" : "offset_end",
        ": offsets need relative time"));
  }
  for (const auto& [field, offset] :
       {std::pair("offset_start", r.offset_start), std::pair("offset_end", r.offset_end)}) {
    if (offset && *offset > kLongestOffset) {
      return absl::InvalidArgumentError(absl::StrCat(
          field, ": ", absl::FormatDuration(*offset), " is longer than any run"));
    }
  }
  if (r.offset_start && *r.offset_start < absl::ZeroDuration()) {
    return absl::InvalidArgumentError(
        absl::StrCat("offset_start: ", absl::FormatDuration(*r.offset_start),
                     " is before the trial's start"));
  }
  if (r.offset_end && *r.offset_end <= r.offset_start.value_or(absl::ZeroDuration())) {
    return absl::InvalidArgumentError(absl::StrCat(
        "offset_end: ", absl::FormatDuration(*r.offset_end),
        " is not after offset_start ",
        absl::FormatDuration(r.offset_start.value_or(absl::ZeroDuration()))));
  }
  if (r.gpu_index && *r.gpu_index < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("gpu_index: ", *r.gpu_index, " is negative"));
  }
  if (r.max_points && (*r.max_points < 1 || *r.max_points > max_max_points)) {
    return absl::InvalidArgumentError(
        absl::StrCat("max_points: ", *r.max_points, " is not between 1 and ",
                     max_max_points));
  }
  QueryRequest selection;
  selection.names = r.names;
  selection.agent_ids = r.agent_ids;
  selection.start = r.start;
  selection.end = r.end;
  return ValidateWindowAndSelection(selection);
}

// A trial's stored extent: of all its series (its start, for relative
// time) and of the selected ones (the wall-clock window's default).
struct Extent {
  std::optional<int64_t> first_us, last_us;
  std::optional<int64_t> selected_first_us, selected_last_us;
};

void Widen(std::optional<int64_t>& first, std::optional<int64_t>& last,
           const SeriesInfo& s) {
  if (!s.first_time_us) return;
  first = std::min(first.value_or(*s.first_time_us), *s.first_time_us);
  last = std::max(last.value_or(*s.last_time_us), *s.last_time_us);
}

// The pooled buckets of one summary series, on the trial's grid.
struct Pool {
  std::vector<RollupStats> buckets;  // by (start - grid_from) / width
  std::vector<char> filled;
  std::set<std::string> gpus;  // agent + "/" + uuid
  std::set<std::string> agents;
};

void Pour(RollupStats& into, char& filled, const SeriesData& s, size_t i) {
  if (!filled) {
    into = RollupStats{s.count[i], s.sum[i],          s.min[i],
                       s.max[i],   s.first_time_us[i], s.first_value[i],
                       s.last_time_us[i], s.last_value[i]};
    filled = true;
    return;
  }
  into.count += s.count[i];
  into.sum += s.sum[i];
  into.min = std::min(into.min, s.min[i]);
  into.max = std::max(into.max, s.max[i]);
  if (s.first_time_us[i] < into.first_time_us) {
    into.first_time_us = s.first_time_us[i];
    into.first_value = s.first_value[i];
  }
  if (s.last_time_us[i] > into.last_time_us) {
    into.last_time_us = s.last_time_us[i];
    into.last_value = s.last_value[i];
  }
}

// One trial's answer pooled into its summary series, appended to `out`.
void PoolTrial(const SummaryRequest& request, int32_t trial_id,
               const QueryResult& answer, const Plan& grid, int64_t origin_us,
               std::vector<SummarySeries>& out) {
  const size_t slots =
      static_cast<size_t>((grid.read_to_us - grid.read_from_us) / grid.bucket_us);
  std::map<std::tuple<std::string, std::string, std::string>, Pool> pools;
  for (const SeriesData& s : answer.series) {
    const SeriesInfo& info = s.series;
    const bool gpu = !info.gpu_uuid.empty();
    if (gpu && request.gpu_index && info.gpu_index != *request.gpu_index) {
      continue;
    }
    Pool& pool = pools[{request.by_agent ? info.agent_id : "", info.name,
                        info.unit}];
    if (pool.buckets.empty()) {
      pool.buckets.resize(slots);
      pool.filled.resize(slots);
    }
    pool.agents.insert(info.agent_id);
    if (gpu) pool.gpus.insert(absl::StrCat(info.agent_id, "/", info.gpu_uuid));
    for (size_t i = 0; i < s.bucket_start_us.size(); ++i) {
      const int64_t slot = (s.bucket_start_us[i] - grid.read_from_us) / grid.bucket_us;
      if (slot < 0 || static_cast<size_t>(slot) >= slots) continue;
      Pour(pool.buckets[slot], pool.filled[slot], s, i);
    }
  }
  for (auto& [key, pool] : pools) {
    SummarySeries& summary = out.emplace_back();
    summary.trial_id = trial_id;
    summary.gpu_count = static_cast<int>(pool.gpus.size());
    summary.agent_count = static_cast<int>(pool.agents.size());
    summary.origin_us = origin_us;
    SeriesData& data = summary.data;
    std::tie(data.series.agent_id, data.series.name, data.series.unit) = key;
    data.resolution_us = grid.bucket_us;
    for (size_t slot = 0; slot < slots; ++slot) {
      if (!pool.filled[slot]) continue;
      const RollupStats& b = pool.buckets[slot];
      data.bucket_start_us.push_back(grid.read_from_us +
                                     static_cast<int64_t>(slot) * grid.bucket_us);
      data.count.push_back(b.count);
      data.sum.push_back(b.sum);
      data.min.push_back(b.min);
      data.max.push_back(b.max);
      data.mean.push_back(b.sum / static_cast<double>(b.count));
      data.first_time_us.push_back(b.first_time_us);
      data.first_value.push_back(b.first_value);
      data.last_time_us.push_back(b.last_time_us);
      data.last_value.push_back(b.last_value);
    }
    if (data.bucket_start_us.empty()) out.pop_back();
  }
}

}  // namespace

absl::StatusOr<SummaryResult> Summarize(QueryEngine& engine,
                                        const SummaryRequest& request,
                                        absl::Time deadline) {
  RETURN_IF_ERROR(Validate(request, engine.options().max_max_points));
  const int max_points =
      request.max_points.value_or(engine.options().default_max_points);
  QueryRequest selection;
  selection.names = request.names;
  selection.agent_ids = request.agent_ids;

  std::vector<Extent> extents(request.trial_ids.size());
  for (size_t t = 0; t < request.trial_ids.size(); ++t) {
    ASSIGN_OR_RETURN(std::vector<SeriesInfo> series,
                     engine.ListSeries(request.trial_ids[t], deadline));
    for (const SeriesInfo& s : series) {
      Widen(extents[t].first_us, extents[t].last_us, s);
      if (IsSelected(selection, s)) {
        Widen(extents[t].selected_first_us, extents[t].selected_last_us, s);
      }
    }
  }

  SummaryResult result;
  // Each trial's window before alignment: [from, to) in wall-clock time.
  std::vector<std::optional<std::pair<int64_t, int64_t>>> windows(extents.size());
  if (request.relative) {
    int64_t longest = 0;
    for (const Extent& e : extents) {
      if (e.first_us) longest = std::max(longest, *e.last_us - *e.first_us + 1);
    }
    result.start_us = request.offset_start
                          ? absl::ToInt64Microseconds(*request.offset_start)
                          : 0;
    result.end_us = request.offset_end
                        ? absl::ToInt64Microseconds(*request.offset_end)
                        : longest;
    for (size_t t = 0; t < extents.size(); ++t) {
      if (!extents[t].first_us) continue;
      windows[t] = {*extents[t].first_us + result.start_us,
                    *extents[t].first_us + result.end_us};
    }
  } else {
    std::optional<int64_t> first, last;
    for (const Extent& e : extents) {
      if (!e.selected_first_us) continue;
      first = std::min(first.value_or(*e.selected_first_us), *e.selected_first_us);
      last = std::max(last.value_or(*e.selected_last_us), *e.selected_last_us);
    }
    if (request.start) {
      result.start_us = absl::ToUnixMicros(*request.start);
    } else if (first) {
      result.start_us = *first;
    }
    if (request.end) {
      result.end_us = absl::ToUnixMicros(*request.end);
    } else if (last) {
      result.end_us = *last + 1;
    }
    for (size_t t = 0; t < extents.size(); ++t) {
      windows[t] = {result.start_us, result.end_us};
    }
  }
  if (result.start_us >= result.end_us) {  // nothing stored
    result.start_us = result.end_us = 0;
    return result;
  }

  // One width for every trial. In relative time, the width a run starting
  // on a bucket boundary needs: each trial's grid starts at its own start
  // aligned down to it.
  int64_t width = PlanQuery(result.start_us, result.end_us, max_points).bucket_us;
  while (true) {
    result.series.clear();
    result.resolution_us = width;
    absl::Status failed;
    for (size_t t = 0; t < windows.size() && failed.ok(); ++t) {
      if (!windows[t]) continue;
      int64_t origin = 0;
      int64_t from = windows[t]->first, to = windows[t]->second;
      if (request.relative) {
        // Aligning moves the start back by less than a bucket: the window
        // still ends where the run's offset_end is.
        origin = storage::AlignDown(*extents[t].first_us, width);
        from = origin + result.start_us;
      }
      QueryRequest query = selection;
      query.trial_id = request.trial_ids[t];
      query.start = absl::FromUnixMicros(from);
      query.end = absl::FromUnixMicros(to);
      query.resolution_us = width;
      absl::StatusOr<QueryResult> answer = engine.Query(query, deadline);
      if (!answer.ok()) {
        failed = answer.status();
        break;
      }
      PoolTrial(request, query.trial_id, *answer, PlanAtResolution(from, to, width),
                origin, result.series);
    }
    if (failed.ok()) return result;
    // Raw samples too dense to read, or expired: the finest stored
    // buckets, for every trial alike.
    const bool expired = absl::IsOutOfRange(failed);
    if (width >= kFinestStoredUs ||
        (!expired && !absl::IsResourceExhausted(failed))) {
      return failed;
    }
    result.raw_expired = result.raw_expired || expired;
    width = kFinestStoredUs;
  }
}

}  // namespace metrics::query
