// A latency histogram with fixed bucket bounds, in the shape Prometheus
// exposes (cumulative counts per upper bound, a sum and a count), for the
// service's own statistics: batch commit and query latency.
//
// Thread-safety: thread-safe; Observe is a short critical section.
#ifndef METRICS_COMMON_HISTOGRAM_H_
#define METRICS_COMMON_HISTOGRAM_H_

#include <cstdint>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace metrics::common {

struct HistogramSnapshot {
  std::vector<double> upper_bounds;      // increasing; +Inf is implied
  std::vector<uint64_t> cumulative;      // per bound, then +Inf (= count)
  double sum = 0;
};

class Histogram {
 public:
  // Seconds from 1 ms to 10 s, for latencies.
  static std::vector<double> LatencyBounds();

  explicit Histogram(std::vector<double> upper_bounds);

  void Observe(double value) ABSL_LOCKS_EXCLUDED(mu_);
  HistogramSnapshot Snapshot() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  const std::vector<double> upper_bounds_;
  mutable absl::Mutex mu_;
  std::vector<uint64_t> counts_ ABSL_GUARDED_BY(mu_);  // per bucket, +Inf last
  double sum_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace metrics::common

#endif  // METRICS_COMMON_HISTOGRAM_H_
