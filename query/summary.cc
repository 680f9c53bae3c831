#include "query/summary.h"

#include <algorithm>
#include <map>
#include <set>
#include <tuple>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "query/plan.h"
#include "storage/rollup.h"

namespace metrics::query {

namespace {

using storage::RollupStats;
using storage::SeriesInfo;

// From this many agents a trial's stored rows are read in two halves at
// once.
constexpr size_t kAgentsToSplit = 4;

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

// A trial's stored extent (its start, for relative time) and the series
// the request selects of it.
struct Extent {
  std::optional<int64_t> first_us, last_us;
  std::vector<SeriesInfo> selected;  // with the GPU index chosen, if any
};

// The pooled buckets of one summary series, on the trial's grid; a bucket
// with count 0 holds nothing yet. Buckets pool by RollupStats::Merge, as
// stored buckets do: first and last go by time, and at equal times (the
// GPUs of one report) the first series poured gives the first value and
// the last one poured the last value. Series pour by agent, then as the
// store orders them.
struct Pool {
  std::vector<RollupStats> buckets;  // by (start - grid_from) / width
  std::set<std::string> gpus;  // agent + "/" + uuid
  std::set<std::string> agents;
};

// One trial's summary series being pooled: the selected series of the
// trial, each mapped to its pool, and the pools on the trial's grid.
class TrialPools : public storage::RollupSink {
 public:
  TrialPools(const SummaryRequest& request, const std::vector<SeriesInfo>& selected,
             const Plan& grid)
      : grid_(grid),
        slots_(static_cast<size_t>((grid.read_to_us - grid.read_from_us) / grid.bucket_us)) {
    std::map<std::tuple<std::string, std::string, std::string>, size_t> index;
    for (const SeriesInfo& s : selected) {
      const auto [it, added] = index.emplace(
          std::tuple(request.by_agent ? s.agent_id : "", s.name, s.unit), keys_.size());
      if (added) keys_.push_back(it->first);
      pool_of_[s.agent_id][s.series_id] = it->second;
    }
    pools_.resize(keys_.size());
    Restart();
    for (const SeriesInfo& s : selected) {
      Pool& pool = pools_[pool_of_[s.agent_id][s.series_id]];
      pool.agents.insert(s.agent_id);
      if (!s.gpu_uuid.empty()) pool.gpus.insert(absl::StrCat(s.agent_id, "/", s.gpu_uuid));
    }
  }

  void Restart() override {
    for (Pool& pool : pools_) pool.buckets.assign(slots_, RollupStats());
  }

  void Take(const storage::RollupRow& row) override {
    const auto agent = pool_of_.find(row.agent_id);
    if (agent == pool_of_.end()) return;
    const int64_t slot = Slot(storage::AlignDown(row.bucket_start_us, grid_.bucket_us));
    if (slot < 0) return;
    for (const auto& [id, stats] : row.stats) {
      const auto it = agent->second.find(id);
      if (it == agent->second.end()) continue;
      pools_[it->second].buckets[slot].Merge(stats);
    }
  }

  // Another's pools, over the same series and grid and poured from later
  // agents, poured in.
  void Absorb(const TrialPools& other) {
    for (size_t p = 0; p < pools_.size(); ++p) {
      for (size_t slot = 0; slot < slots_; ++slot) {
        pools_[p].buckets[slot].Merge(other.pools_[p].buckets[slot]);
      }
    }
  }

  // A chart answer's series (one of `selected`) poured in.
  void Take(const SeriesData& s) {
    const auto agent = pool_of_.find(s.series.agent_id);
    if (agent == pool_of_.end()) return;
    const auto it = agent->second.find(s.series.series_id);
    if (it == agent->second.end()) return;
    Pool& pool = pools_[it->second];
    for (size_t i = 0; i < s.bucket_start_us.size(); ++i) {
      const int64_t slot = Slot(s.bucket_start_us[i]);
      if (slot < 0) continue;
      pool.buckets[slot].Merge(RollupStats{s.count[i], s.sum[i], s.min[i], s.max[i],
                                           s.first_time_us[i], s.first_value[i],
                                           s.last_time_us[i], s.last_value[i]});
    }
  }

  // The summary series with at least one bucket, appended to `out`.
  void AppendTo(int32_t trial_id, int64_t origin_us, std::vector<SummarySeries>& out) const {
    for (size_t p = 0; p < pools_.size(); ++p) {
      const Pool& pool = pools_[p];
      SummarySeries summary;
      summary.trial_id = trial_id;
      summary.gpu_count = static_cast<int>(pool.gpus.size());
      summary.agent_count = static_cast<int>(pool.agents.size());
      summary.origin_us = origin_us;
      SeriesData& data = summary.data;
      std::tie(data.series.agent_id, data.series.name, data.series.unit) = keys_[p];
      data.resolution_us = grid_.bucket_us;
      for (size_t slot = 0; slot < slots_; ++slot) {
        if (pool.buckets[slot].count == 0) continue;
        AppendBucket(data, grid_.read_from_us + static_cast<int64_t>(slot) * grid_.bucket_us,
                     pool.buckets[slot]);
      }
      if (!data.bucket_start_us.empty()) out.push_back(std::move(summary));
    }
  }

 private:
  int64_t Slot(int64_t bucket_start_us) const {
    const int64_t slot = (bucket_start_us - grid_.read_from_us) / grid_.bucket_us;
    return slot >= 0 && static_cast<size_t>(slot) < slots_ ? slot : -1;
  }

  const Plan grid_;
  const size_t slots_;
  std::vector<std::tuple<std::string, std::string, std::string>> keys_;  // by pool
  std::vector<Pool> pools_;
  // agent -> series id -> pool
  absl::flat_hash_map<std::string, absl::flat_hash_map<int64_t, size_t>> pool_of_;
};

// One trial pooled into `out`: from the stored rollups directly where the
// width is a stored one's multiple (no per-series answer is built), else
// from the chart query's answer (raw samples bucketed).
absl::Status SummarizeTrial(QueryEngine& engine, const SummaryRequest& request,
                            const QueryRequest& query, const std::vector<SeriesInfo>& selected,
                            int64_t origin_us, absl::Time deadline,
                            std::vector<SummarySeries>& out) {
  const Plan plan = PlanAtResolution(absl::ToUnixMicros(*query.start),
                                     absl::ToUnixMicros(*query.end), *query.resolution_us);
  TrialPools pools(request, selected, plan);
  if (plan.stored_width_s > 0) {
    std::vector<std::string> agents;
    absl::flat_hash_set<absl::string_view> seen;
    for (const SeriesInfo& s : selected) {
      if (seen.insert(s.agent_id).second) agents.push_back(s.agent_id);
    }
    if (agents.size() < kAgentsToSplit) {
      RETURN_IF_ERROR(engine.ReadStored(query.trial_id, selected, plan, deadline, pools));
    } else {
      // Many agents: the later half of them read meanwhile on a second
      // connection and thread, when the engine has one free (the
      // database's work and the decoding both split).
      const absl::flat_hash_set<absl::string_view> later(agents.begin() + agents.size() / 2,
                                                         agents.end());
      std::vector<SeriesInfo> first_half, second_half;
      for (const SeriesInfo& s : selected) {
        (later.contains(s.agent_id) ? second_half : first_half).push_back(s);
      }
      TrialPools other(request, selected, plan);
      absl::Status read_here, read_there;
      engine.RunAlongside(
          [&] { read_here = engine.ReadStored(query.trial_id, first_half, plan, deadline, pools); },
          [&] {
            read_there = engine.ReadStored(query.trial_id, second_half, plan, deadline, other);
          });
      RETURN_IF_ERROR(read_here);
      RETURN_IF_ERROR(read_there);
      pools.Absorb(other);
    }
  } else {
    ASSIGN_OR_RETURN(QueryResult answer, engine.Query(query, deadline));
    for (const SeriesData& s : answer.series) pools.Take(s);
  }
  pools.AppendTo(query.trial_id, origin_us, out);
  return absl::OkStatus();
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
  // The selected series' extent across the trials: the wall-clock default.
  std::optional<int64_t> selected_first_us, selected_last_us;
  for (size_t t = 0; t < request.trial_ids.size(); ++t) {
    ASSIGN_OR_RETURN(std::vector<SeriesInfo> series,
                     engine.ListSeries(request.trial_ids[t], deadline));
    for (const SeriesInfo& s : series) {
      WidenExtent(extents[t].first_us, extents[t].last_us, s);
      if (!IsSelected(selection, s)) continue;
      if (!s.gpu_uuid.empty() && request.gpu_index && s.gpu_index != *request.gpu_index) {
        continue;
      }
      WidenExtent(selected_first_us, selected_last_us, s);
      extents[t].selected.push_back(s);
    }
  }

  SummaryResult result;
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
  } else {
    std::tie(result.start_us, result.end_us) =
        WindowOf(request.start, request.end, selected_first_us, selected_last_us);
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
    for (size_t t = 0; t < extents.size() && failed.ok(); ++t) {
      if (extents[t].selected.empty() || !extents[t].first_us) continue;
      int64_t origin = 0;
      int64_t from = result.start_us, to = result.end_us;
      if (request.relative) {
        // Aligning moves the start back by less than a bucket: the window
        // still ends where the run's offset_end is.
        origin = storage::AlignDown(*extents[t].first_us, width);
        from = origin + result.start_us;
        to = *extents[t].first_us + result.end_us;
      }
      QueryRequest query = selection;
      query.trial_id = request.trial_ids[t];
      query.start = absl::FromUnixMicros(from);
      query.end = absl::FromUnixMicros(to);
      query.resolution_us = width;
      failed = SummarizeTrial(engine, request, query, extents[t].selected, origin, deadline,
                              result.series);
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
