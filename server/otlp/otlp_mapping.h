// OTLP metrics in the service's terms: an ExportMetricsServiceRequest
// becomes one MetricBatch per (trial, agent), with OpenTelemetry's host and
// GPU names turned into the service's series (docs/otlp.md has the table):
//   trial   resource attribute trial.id (or determined.trial.id)
//   agent   resource attribute host.name (or agent.id)
//   GPU     data-point attribute gpu.uuid, hw.id or DCGM's UUID
//   system.cpu.utilization (per CPU and state, 0-1)  -> cpu_util_simple
//       = 100 x (1 - the mean over CPUs of the idle share)
//   system.memory.linux.available (system.linux.memory.available)
//                                                   -> memory_free
//   system.network.io, system.disk.io, system.disk.operations (cumulative)
//       -> net_throughput_sent|recv, disk_throughput_read|write, disk_iops:
//          the rate since the series' previous point, summed over devices
//          but loopback
//   hw.gpu.utilization (0-1), DCGM_FI_DEV_GPU_UTIL   -> gpu_util
//   hw.gpu.memory.limit - hw.gpu.memory.usage, DCGM_FI_DEV_FB_FREE
//                                                   -> gpu_free_memory
//   DCGM's power, temperature, clocks, memory used  -> gpu_power, ...
// Any other gauge or sum is stored under its own name and UCUM unit, its
// attributes but the GPU's appended to the name ("name{k=v,...}").
// Histograms, exponential histograms and summaries, points without a
// trial, agent, time or finite value are refused and counted, with the
// first reasons, for OTLP's partial success.
//
// Rates from cumulative sums need the series' previous point: RateState
// keeps it, bounded, in this metricsd only. A restarted metricsd, or a
// series whose points go to two replicas, starts over: its next point is a
// base, not a rate.
//
// Thread-safety: MapExport is a pure function but for `rates`; RateState is
// thread-safe.
#ifndef METRICS_SERVER_OTLP_OTLP_MAPPING_H_
#define METRICS_SERVER_OTLP_OTLP_MAPPING_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "proto/opentelemetry/proto/collector/metrics/v1/metrics_service.pb.h"
#include "storage/batch_validation.h"
#include "storage/metric_store.h"

namespace metrics::server {

// Distinct reasons an answer's partial success names, at most.
inline constexpr size_t kMaxOtlpReasons = 5;

// The previous point of each cumulative series, for rates.
class RateState {
 public:
  explicit RateState(size_t max_series = 100000) : max_series_(max_series) {}

  // The rate per second from the series' previous point to this one; none
  // for its first point, a reset (a new start time or a smaller value) or
  // a point not newer than the previous.
  std::optional<double> Rate(const std::string& series, int64_t start_us,
                             int64_t time_us, double value)
      ABSL_LOCKS_EXCLUDED(mu_);

  size_t size() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  struct Point {
    int64_t start_us;
    int64_t time_us;
    double value;
  };
  const size_t max_series_;
  mutable absl::Mutex mu_;
  absl::flat_hash_map<std::string, Point> points_ ABSL_GUARDED_BY(mu_);
};

struct OtlpBatches {
  // One per (trial, agent), without a stream id (OTLP has no sequence).
  std::vector<storage::MetricBatch> batches;
  int64_t accepted_points = 0;
  int64_t rejected_points = 0;
  // The first distinct reasons, for the partial success's error_message.
  std::vector<std::string> reasons;
};

// `limits` and `now` refuse, point by point, what the store would refuse a
// whole batch for (a label too long, a time too far ahead). With
// `only_trial` (a reporter's token), the points of any other trial are
// refused.
OtlpBatches MapExport(
    const opentelemetry::proto::collector::metrics::v1::ExportMetricsServiceRequest&
        request,
    RateState& rates, const storage::IngestLimits& limits, absl::Time now,
    std::optional<int32_t> only_trial = std::nullopt);

}  // namespace metrics::server

#endif  // METRICS_SERVER_OTLP_OTLP_MAPPING_H_
