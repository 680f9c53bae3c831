#include "query/plan.h"

#include <iterator>

#include "storage/rollup.h"

namespace metrics::query {

namespace {

int64_t CeilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

}  // namespace

Plan PlanQuery(int64_t start_us, int64_t end_us, int max_points) {
  const int64_t wanted = CeilDiv(end_us - start_us, max_points);
  Plan plan;
  // The coarsest stored width no wider than the detail asked for.
  for (int width : storage::kRollupWidthsSeconds) {
    if (int64_t{width} * 1000000 <= wanted) plan.stored_width_s = width;
  }
  const int64_t step =
      plan.stored_width_s > 0 ? int64_t{plan.stored_width_s} * 1000000 : 1000;
  plan.bucket_us = step * CeilDiv(wanted, step);
  // Aligned buckets may straddle both ends of the window: widen by another
  // step until the whole ones fit in max_points.
  while (true) {
    plan.read_from_us = storage::AlignDown(start_us, plan.bucket_us);
    plan.read_to_us = storage::AlignDown(end_us - 1, plan.bucket_us) + plan.bucket_us;
    if ((plan.read_to_us - plan.read_from_us) / plan.bucket_us <= max_points) {
      break;
    }
    plan.bucket_us += step;
  }
  return plan;
}

Plan PlanAtResolution(int64_t start_us, int64_t end_us, int64_t bucket_us) {
  Plan plan;
  plan.bucket_us = bucket_us;
  if (bucket_us == 0) {
    plan.read_from_us = start_us;
    plan.read_to_us = end_us;
    return plan;
  }
  for (int width : storage::kRollupWidthsSeconds) {
    if (bucket_us % (int64_t{width} * 1000000) == 0) {
      plan.stored_width_s = width;
    }
  }
  plan.read_from_us = storage::AlignDown(start_us, bucket_us);
  plan.read_to_us = storage::AlignDown(end_us - 1, bucket_us) + bucket_us;
  return plan;
}

}  // namespace metrics::query
