#include "query/follow_cursor.h"

#include <algorithm>
#include <utility>
#include <vector>

namespace metrics::query {

namespace {

// The buckets a round re-reads per series: a late report lands in the
// newest ones; older buckets are final as far as a follow is concerned.
constexpr size_t kTailBuckets = 2;

void AppendBucket(SeriesData& out, const SeriesData& in, size_t i) {
  out.bucket_start_us.push_back(in.bucket_start_us[i]);
  out.count.push_back(in.count[i]);
  out.sum.push_back(in.sum[i]);
  out.min.push_back(in.min[i]);
  out.max.push_back(in.max[i]);
  out.mean.push_back(in.mean[i]);
  out.first_time_us.push_back(in.first_time_us[i]);
  out.first_value.push_back(in.first_value[i]);
  out.last_time_us.push_back(in.last_time_us[i]);
  out.last_value.push_back(in.last_value[i]);
}

// Bitwise equal stats (the mean follows from count and sum).
bool SameBucket(const SeriesData& a, size_t i, const SeriesData& b, size_t j) {
  return a.bucket_start_us[i] == b.bucket_start_us[j] &&
         a.count[i] == b.count[j] && a.sum[i] == b.sum[j] &&
         a.min[i] == b.min[j] && a.max[i] == b.max[j] &&
         a.first_time_us[i] == b.first_time_us[j] &&
         a.first_value[i] == b.first_value[j] &&
         a.last_time_us[i] == b.last_time_us[j] &&
         a.last_value[i] == b.last_value[j];
}

bool SameColumns(const SeriesData& a, const SeriesData& b) {
  return a.bucket_start_us == b.bucket_start_us && a.count == b.count &&
         a.sum == b.sum && a.min == b.min && a.max == b.max &&
         a.first_time_us == b.first_time_us &&
         a.first_value == b.first_value && a.last_time_us == b.last_time_us &&
         a.last_value == b.last_value;
}

}  // namespace

bool FollowCursor::SameStateAs(const FollowCursor& other) const {
  if (!started_ || !other.started_ ||
      resolution_us_ != other.resolution_us_ ||
      tails_.size() != other.tails_.size()) {
    return false;
  }
  for (auto a = tails_.begin(), b = other.tails_.begin(); a != tails_.end();
       ++a, ++b) {
    if (a->first != b->first ||
        a->second.last_time_us != b->second.last_time_us ||
        a->second.returned_at_last != b->second.returned_at_last ||
        !SameColumns(a->second.buckets, b->second.buckets)) {
      return false;
    }
  }
  return true;
}

std::optional<QueryRequest> FollowCursor::NextRequest(absl::Time now) const {
  if (!started_) return request_;
  int64_t tail_start = INT64_MAX;
  for (const auto& [id, tail] : tails_) {
    if (resolution_us_ == 0) {
      tail_start = std::min(tail_start, tail.last_time_us);
    } else if (!tail.buckets.bucket_start_us.empty()) {
      tail_start = std::min(tail_start, tail.buckets.bucket_start_us.front());
    }
  }
  QueryRequest request = request_;
  if (!request.end) request.end = now + absl::Hours(24);
  if (tail_start == INT64_MAX ||
      tail_start >= absl::ToUnixMicros(*request.end)) {
    return std::nullopt;
  }
  request.start = absl::FromUnixMicros(tail_start);
  return request;
}

std::optional<QueryRequest> FollowCursor::AtOneResolution(
    const QueryResult& answer) const {
  if (started_) return std::nullopt;
  int64_t coarsest = 0;
  bool mixed = false, any = false;
  for (const SeriesData& d : answer.series) {
    if (d.count.empty()) continue;
    if (any && d.resolution_us != coarsest) mixed = true;
    coarsest = std::max(coarsest, d.resolution_us);
    any = true;
  }
  if (!mixed) return std::nullopt;
  QueryRequest again = request_;
  again.resolution_us = coarsest;
  return again;
}

QueryResult FollowCursor::Take(QueryResult answer) {
  if (!started_) {
    Start(answer);
    return answer;
  }
  QueryResult changes;
  changes.start_us = answer.start_us;
  changes.end_us = answer.end_us;
  for (const SeriesData& d : answer.series) {
    if (d.count.empty()) continue;
    // A series first seen now starts with an empty tail: all of it is new.
    SeriesData part = NewPart(d, tails_[d.series.series_id]);
    if (!part.count.empty()) changes.series.push_back(std::move(part));
  }
  return changes;
}

void FollowCursor::Start(const QueryResult& answer) {
  int64_t resolution = 0;
  bool any = false;
  for (const SeriesData& d : answer.series) {
    if (d.count.empty()) continue;
    resolution = std::max(resolution, d.resolution_us);
    any = true;
  }
  if (!any) return;  // nothing stored yet: the next round asks again
  started_ = true;
  resolution_us_ = resolution;
  request_.resolution_us = resolution;
  for (const SeriesData& d : answer.series) {
    if (d.count.empty()) continue;
    NewPart(d, tails_[d.series.series_id]);
  }
}

SeriesData FollowCursor::NewPart(const SeriesData& in, Tail& tail) const {
  SeriesData part;
  part.series = in.series;
  part.resolution_us = resolution_us_;
  if (resolution_us_ == 0) {
    // Points come in (time, ingest) order: skip those returned before,
    // including the first `returned_at_last` at the last time.
    const int64_t previous_time = tail.last_time_us;
    const int64_t previous_count = tail.returned_at_last;
    int64_t seen_at_previous = 0;
    for (size_t i = 0; i < in.count.size(); ++i) {
      const int64_t time = in.bucket_start_us[i];
      if (time < previous_time) continue;
      if (time == previous_time && ++seen_at_previous <= previous_count) {
        continue;
      }
      if (time == tail.last_time_us) {
        ++tail.returned_at_last;
      } else {
        tail.last_time_us = time;
        tail.returned_at_last = 1;
      }
      AppendBucket(part, in, i);
    }
    return part;
  }
  const SeriesData& known = tail.buckets;
  // Buckets before the tail were returned and are final; the tail's are
  // returned again only when changed.
  const int64_t tail_start =
      known.bucket_start_us.empty() ? INT64_MIN : known.bucket_start_us.front();
  // The new tail: the newest kTailBuckets of the known and the answered.
  std::map<int64_t, std::pair<const SeriesData*, size_t>> newest;
  for (size_t j = 0; j < known.count.size(); ++j) {
    newest[known.bucket_start_us[j]] = {&known, j};
  }
  for (size_t i = 0; i < in.count.size(); ++i) {
    const int64_t start = in.bucket_start_us[i];
    if (start < tail_start) continue;
    newest[start] = {&in, i};
    const auto at = std::find(known.bucket_start_us.begin(),
                              known.bucket_start_us.end(), start);
    if (at != known.bucket_start_us.end() &&
        SameBucket(in, i, known, at - known.bucket_start_us.begin())) {
      continue;
    }
    AppendBucket(part, in, i);
  }
  while (newest.size() > kTailBuckets) newest.erase(newest.begin());
  SeriesData next;
  for (const auto& [start, where] : newest) {
    AppendBucket(next, *where.first, where.second);
  }
  tail.buckets = std::move(next);
  return part;
}

}  // namespace metrics::query
