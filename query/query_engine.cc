#include "query/query_engine.h"

#include <algorithm>
#include <optional>
#include <tuple>
#include <utility>

#include "absl/container/btree_map.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "common/time_format.h"
#include "query/plan.h"
#include "storage/batch_validation.h"

namespace metrics::query {

namespace {

using storage::RollupStats;
using storage::SeriesInfo;

absl::Status ValidateSelection(absl::string_view field,
                               const std::vector<std::string>& values,
                               bool allow_empty) {
  for (size_t i = 0; i < values.size(); ++i) {
    RETURN_IF_ERROR(storage::ValidateLabel(absl::StrCat(field, "[", i, "]"),
                                           values[i], storage::kMaxLabelLength,
                                           allow_empty));
  }
  return absl::OkStatus();
}

bool Selected(const std::vector<std::string>& wanted, const std::string& v) {
  return wanted.empty() ||
         std::find(wanted.begin(), wanted.end(), v) != wanted.end();
}

}  // namespace

void AppendBucket(SeriesData& out, int64_t bucket_start_us, const RollupStats& s) {
  out.bucket_start_us.push_back(bucket_start_us);
  out.count.push_back(s.count);
  out.sum.push_back(s.sum);
  out.min.push_back(s.min);
  out.max.push_back(s.max);
  out.mean.push_back(s.sum / static_cast<double>(s.count));
  out.first_time_us.push_back(s.first_time_us);
  out.first_value.push_back(s.first_value);
  out.last_time_us.push_back(s.last_time_us);
  out.last_value.push_back(s.last_value);
}

absl::Status ValidateWindowAndSelection(const QueryRequest& request) {
  if (request.start && request.end && *request.start >= *request.end) {
    return absl::InvalidArgumentError(absl::StrCat(
        "start: ", common::Rfc3339(*request.start), " is not before end ",
        common::Rfc3339(*request.end)));
  }
  RETURN_IF_ERROR(ValidateSelection("name", request.names, false));
  RETURN_IF_ERROR(ValidateSelection("agent_id", request.agent_ids, false));
  RETURN_IF_ERROR(ValidateSelection("gpu_uuid", request.gpu_uuids, true));
  return absl::OkStatus();
}

bool IsSelected(const QueryRequest& request, const storage::SeriesInfo& series) {
  return Selected(request.names, series.name) &&
         Selected(request.agent_ids, series.agent_id) &&
         Selected(request.gpu_uuids, series.gpu_uuid);
}

void WidenExtent(std::optional<int64_t>& first_us, std::optional<int64_t>& last_us,
                 const storage::SeriesInfo& series) {
  if (!series.first_time_us) return;
  first_us = std::min(first_us.value_or(*series.first_time_us), *series.first_time_us);
  last_us = std::max(last_us.value_or(*series.last_time_us), *series.last_time_us);
}

std::pair<int64_t, int64_t> WindowOf(const std::optional<absl::Time>& start,
                                     const std::optional<absl::Time>& end,
                                     std::optional<int64_t> first_us,
                                     std::optional<int64_t> last_us) {
  std::pair<int64_t, int64_t> window{0, 0};
  if (start) {
    window.first = absl::ToUnixMicros(*start);
  } else if (first_us) {
    window.first = *first_us;
  }
  if (end) {
    window.second = absl::ToUnixMicros(*end);
  } else if (last_us) {
    window.second = *last_us + 1;
  }
  return window;
}

absl::StatusOr<Selection> SelectSeries(storage::ChartReads& reads, const QueryRequest& request,
                                       absl::Time deadline) {
  RETURN_IF_ERROR(ValidateWindowAndSelection(request));
  const bool need_extents = !request.start || !request.end;
  ASSIGN_OR_RETURN(std::vector<SeriesInfo> all,
                   reads.ListSeries(request.trial_id, need_extents, deadline));
  Selection selection;
  std::optional<int64_t> first, last;
  for (SeriesInfo& s : all) {
    if (!IsSelected(request, s)) continue;
    WidenExtent(first, last, s);
    selection.series.push_back(std::move(s));
  }
  std::tie(selection.from_us, selection.to_us) =
      WindowOf(request.start, request.end, first, last);
  return selection;
}

namespace {

// Merges stored rollup rows into the answer's buckets as the store hands
// them over. Rows come ordered by agent and bucket start, so each series'
// buckets arrive in order: only the bucket being filled is held, and a
// finished one goes straight into the answer.
class BucketMerger : public storage::RollupSink {
 public:
  // `out[i]` receives the buckets of `selected[i]`.
  BucketMerger(const std::vector<SeriesInfo>& selected, int64_t bucket_us,
               std::vector<SeriesData>& out)
      : bucket_us_(bucket_us), out_(out), open_(selected.size()) {
    for (size_t i = 0; i < selected.size(); ++i) {
      index_[selected[i].agent_id][selected[i].series_id] = i;
      out_[i].resolution_us = bucket_us;
    }
  }

  void Restart() override {
    for (size_t i = 0; i < out_.size(); ++i) {
      SeriesData fresh;
      fresh.series = std::move(out_[i].series);
      fresh.resolution_us = bucket_us_;
      out_[i] = std::move(fresh);
      open_[i].reset();
    }
  }

  void Take(const storage::RollupRow& row) override {
    auto agent = index_.find(absl::string_view(row.agent_id));
    if (agent == index_.end()) return;
    const int64_t bucket = storage::AlignDown(row.bucket_start_us, bucket_us_);
    for (const auto& [id, stats] : row.stats) {
      auto it = agent->second.find(id);
      if (it == agent->second.end()) continue;
      std::optional<OpenBucket>& open = open_[it->second];
      if (open && open->start == bucket) {
        open->stats.Merge(stats);
        continue;
      }
      if (open) AppendBucket(out_[it->second], open->start, open->stats);
      open = OpenBucket{bucket, stats};
    }
  }

  // Appends the buckets still being filled; call once, after the read.
  void Finish() {
    for (size_t i = 0; i < out_.size(); ++i) {
      if (open_[i]) AppendBucket(out_[i], open_[i]->start, open_[i]->stats);
    }
  }

 private:
  struct OpenBucket {
    int64_t start;
    RollupStats stats;
  };
  const int64_t bucket_us_;
  std::vector<SeriesData>& out_;
  std::vector<std::optional<OpenBucket>> open_;
  // agent -> series id -> index in `out_`; looked up per stored row without
  // building a key (heterogeneous lookup by string_view).
  absl::flat_hash_map<std::string, absl::flat_hash_map<int64_t, size_t>>
      index_;
};

// The most reports any agent is expected to have in `window_us`, from the
// density of each series over its extent (0 when extents are unknown).
int64_t EstimatedReportsPerAgent(const std::vector<SeriesInfo>& series,
                                 int64_t window_us) {
  double most = 0;
  for (const SeriesInfo& s : series) {
    if (!s.first_time_us || s.sample_count == 0) continue;
    const double extent_us =
        static_cast<double>(*s.last_time_us - *s.first_time_us + 1);
    most = std::max(most, s.sample_count * std::min(1.0, window_us / extent_us));
  }
  return static_cast<int64_t>(most);
}

// A short window from raw samples: returned as they are when few enough
// (or when raw points are demanded), else bucketed here, exactly as the
// rollups would be.
void AnswerFromRawSamples(const QueryRequest& request, const Plan& plan,
                          int max_points,
                          const std::vector<std::vector<storage::Sample>>& samples,
                          QueryResult& result) {
  for (size_t i = 0; i < samples.size(); ++i) {
    SeriesData& out = result.series[i];
    size_t in_window = 0;
    for (const storage::Sample& s : samples[i]) {
      in_window += s.time_us >= result.start_us && s.time_us < result.end_us;
    }
    const bool raw_points =
        request.resolution_us ? *request.resolution_us == 0
                              : in_window <= static_cast<size_t>(max_points);
    if (raw_points) {
      out.resolution_us = 0;
      for (const storage::Sample& s : samples[i]) {
        if (s.time_us < result.start_us || s.time_us >= result.end_us) continue;
        RollupStats point;
        point.Add(s.time_us, s.value);
        AppendBucket(out, s.time_us, point);
      }
      continue;
    }
    out.resolution_us = plan.bucket_us;
    absl::btree_map<int64_t, RollupStats> bucketed;
    for (const storage::Sample& s : samples[i]) {
      bucketed[storage::AlignDown(s.time_us, plan.bucket_us)].Add(s.time_us, s.value);
    }
    for (const auto& [start, stats] : bucketed) AppendBucket(out, start, stats);
  }
}

}  // namespace

QueryEngine::QueryEngine(storage::ChartReads* reads, QueryOptions options)
    : reads_(reads),
      options_(options),
      side_reads_(options.side_read_threads > 0
                      ? std::make_unique<common::BlockingExecutor>(
                            options.side_read_threads, options.side_read_threads)
                      : nullptr) {}

void QueryEngine::RunAlongside(absl::FunctionRef<void()> here, absl::FunctionRef<void()> there) {
  if (side_reads_ == nullptr) {
    here();
    there();
    return;
  }
  side_reads_->RunAlongside(here, there);
}

absl::Status QueryEngine::ReadStored(int32_t trial_id, const std::vector<SeriesInfo>& series,
                                     const Plan& plan, absl::Time deadline,
                                     storage::RollupSink& sink) {
  std::vector<std::string> agents;
  absl::flat_hash_set<absl::string_view> seen;
  std::vector<int64_t> ids;
  for (const SeriesInfo& s : series) {
    if (seen.insert(s.agent_id).second) agents.push_back(s.agent_id);
    ids.push_back(s.series_id);
  }
  return reads_->ReadRollups(trial_id, agents, plan.stored_width_s, ids, plan.read_from_us,
                             plan.read_to_us, deadline, sink);
}

absl::StatusOr<std::vector<SeriesInfo>> QueryEngine::ListSeries(
    int32_t trial_id, absl::Time deadline) {
  return reads_->ListSeries(trial_id, /*extents=*/true, deadline);
}

absl::StatusOr<QueryResult> QueryEngine::Query(const QueryRequest& request,
                                               absl::Time deadline) {
  const int max_points = request.max_points.value_or(options_.default_max_points);
  if (max_points < 1 || max_points > options_.max_max_points) {
    return absl::InvalidArgumentError(
        absl::StrCat("max_points: ", max_points, " is not between 1 and ",
                     options_.max_max_points));
  }
  ASSIGN_OR_RETURN(Selection selection, SelectSeries(*reads_, request, deadline));
  QueryResult result;
  const std::vector<SeriesInfo>& selected = selection.series;
  for (const SeriesInfo& s : selected) result.series.emplace_back().series = s;
  if (selected.empty()) return result;
  result.start_us = selection.from_us;
  result.end_us = selection.to_us;
  if (result.start_us >= result.end_us) {  // nothing stored in the window
    result.start_us = result.end_us = 0;
    return result;
  }

  Plan plan =
      request.resolution_us
          ? PlanAtResolution(result.start_us, result.end_us,
                             *request.resolution_us)
          : PlanQuery(result.start_us, result.end_us, max_points);
  // With the series' extents at hand, a window whose raw rows would surely
  // pass the limit skips the attempt (a busy chart asks again and again).
  const bool surely_dense =
      !request.resolution_us &&
      EstimatedReportsPerAgent(selected, plan.read_to_us - plan.read_from_us) >
          options_.max_raw_reports_per_agent;
  if (plan.stored_width_s == 0 && !surely_dense) {
    absl::StatusOr<std::vector<std::vector<storage::Sample>>> samples =
        reads_->ReadRawSamples(request.trial_id, selected, plan.read_from_us,
                               plan.read_to_us,
                               options_.max_raw_reports_per_agent, deadline);
    if (samples.ok()) {
      AnswerFromRawSamples(request, plan, max_points, *samples, result);
      return result;
    }
    // Too dense to read raw, or raw data expired: the finest rollup,
    // unless the caller holds us to a resolution.
    const bool expired = absl::IsOutOfRange(samples.status());
    if ((!absl::IsResourceExhausted(samples.status()) && !expired) ||
        request.resolution_us) {
      return samples.status();
    }
    result.raw_expired = expired;
  }
  if (plan.stored_width_s == 0) {
    plan = PlanAtResolution(result.start_us, result.end_us,
                            int64_t{storage::kRollupWidthsSeconds[0]} * 1000000);
  }
  BucketMerger merger(selected, plan.bucket_us, result.series);
  RETURN_IF_ERROR(ReadStored(request.trial_id, selected, plan, deadline, merger));
  merger.Finish();
  return result;
}

}  // namespace metrics::query
