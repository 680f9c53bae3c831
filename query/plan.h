// Chooses how to answer a time-bucketed query: the coarsest stored rollup
// width that still gives at least the detail asked for, widened to a whole
// multiple of itself so the number of buckets stays within max_points, with
// buckets aligned to multiples of their width since the epoch (so each is a
// union of whole stored buckets). Below the finest stored width, raw
// samples are read instead. The cost of the answer is then bounded by the
// buckets returned (at most 10 stored buckets per returned one, the ratio
// of neighbouring widths), not by the length of the run.
//
// Thread-safety: pure functions.
#ifndef METRICS_QUERY_PLAN_H_
#define METRICS_QUERY_PLAN_H_

#include <cstdint>

#include "absl/status/statusor.h"

namespace metrics::query {

struct Plan {
  // The stored width to read, in seconds; 0 means read raw samples.
  int stored_width_s = 0;
  // The width of the returned buckets, a multiple of the stored width
  // (raw: a whole number of milliseconds), in microseconds.
  int64_t bucket_us = 0;
  // The whole buckets that intersect the window: [read_from_us, read_to_us).
  int64_t read_from_us = 0;
  int64_t read_to_us = 0;
};

// REQUIRES: start_us < end_us, max_points > 0.
Plan PlanQuery(int64_t start_us, int64_t end_us, int max_points);

// The plan for buckets of exactly `bucket_us` (0: raw points), read from the
// coarsest stored width that divides it, else from raw samples. For
// following a query at the resolution it started with.
// REQUIRES: start_us < end_us, bucket_us >= 0.
Plan PlanAtResolution(int64_t start_us, int64_t end_us, int64_t bucket_us);

}  // namespace metrics::query

#endif  // METRICS_QUERY_PLAN_H_
