// Following a query: a cursor over successive answers to one query that
// yields, each time, only what is new or changed since the answers before.
// The first answer with data fixes the resolution (the coarsest any series
// was answered at, or raw points if all were); later rounds ask only for
// the tail of the window at that resolution. A bucket is yielded again when
// its stats changed (a late report landed in it); a raw point is yielded
// once, including each of several points with the same time (they come in
// ingest order, so the cursor counts those it has yielded at the last time).
//
// Pure: it never calls the engine; the caller runs the requests it gives.
//
// Thread-safety: not thread-safe; one caller (one round at a time).
#ifndef METRICS_QUERY_FOLLOW_CURSOR_H_
#define METRICS_QUERY_FOLLOW_CURSOR_H_

#include <cstdint>
#include <map>
#include <optional>

#include "absl/time/time.h"
#include "query/query_engine.h"

namespace metrics::query {

class FollowCursor {
 public:
  explicit FollowCursor(QueryRequest request) : request_(std::move(request)) {}

  // The request of the next round: the whole query until an answer had data,
  // then the tail of its window at the fixed resolution. An unbounded window
  // ends a day after `now`. nullopt when the tail lies past the window's end
  // (nothing more can come).
  std::optional<QueryRequest> NextRequest(absl::Time now) const;

  // For a first answer whose series came at different resolutions: the same
  // request at the coarsest of them, to ask instead. nullopt when the answer
  // is at one resolution, or the cursor has started.
  std::optional<QueryRequest> AtOneResolution(const QueryResult& answer) const;

  // Takes the answer to the request of this round. Before it started, the
  // cursor returns the answer unchanged (every selected series, even empty)
  // and starts once it holds data. After, it returns only buckets that are
  // new or changed and raw points not returned before; series with none are
  // left out.
  QueryResult Take(QueryResult answer);

  // An answer with data has been taken.
  bool started() const { return started_; }

  // Both started, and given the same answers both yield the same parts
  // (cursors of one selection and window end: their requests differ at
  // most in start and max_points, which a started cursor no longer uses).
  bool SameStateAs(const FollowCursor& other) const;

 private:
  // What has been returned of one series.
  struct Tail {
    // Bucketed: the last kTailBuckets buckets returned, to spot changes.
    SeriesData buckets;
    // Raw: the last point's time and how many points at it were returned.
    int64_t last_time_us = INT64_MIN;
    int64_t returned_at_last = 0;
  };

  void Start(const QueryResult& answer);
  // The part of `in` not returned before; updates `tail`.
  SeriesData NewPart(const SeriesData& in, Tail& tail) const;

  QueryRequest request_;
  bool started_ = false;
  int64_t resolution_us_ = 0;
  std::map<int64_t, Tail> tails_;  // by series id
};

}  // namespace metrics::query

#endif  // METRICS_QUERY_FOLLOW_CURSOR_H_
