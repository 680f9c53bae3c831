// The platform's ReportTrialMetrics in the service's terms
// (docs/determined.md has the table):
// - The profiling groups (gpu, cpu, memory, disk, network) become system
//   samples at the report's time, one batch per agent: avgMetrics is
//   {agent: {name: value}}, with one more level where a value has a label:
//   the gpu group's GPU UUID ({agent: {uuid: {name: value}}}, the series'
//   GPU) and the disk group's mount path ({agent: {"/": {"disk_util": v}}},
//   the series "disk_util{mount=/}"). Names keep the harness's, which are
//   our own agent's; units come from kProfilingUnits. A value sent as NaN or
//   +-Infinity (Python's json writes them so; the platform's harness as the
//   strings "NaN", "Infinity", "-Infinity") is dropped and counted.
// - Any other group becomes a GenericReport: the platform's generic row,
//   avgMetrics and batchMetrics as sent (non-finite numbers as the strings
//   the platform stores for them).
// Each batch is the report of its agent's (group) stream, its sequence the
// report's time: a copy of a stored report is a duplicate (see
// MetricBatch::sequence_is_time).
//
// Refusals are INVALID_ARGUMENT naming the field as the harness sends it
// ('metrics.metrics.avgMetrics["node-1"]["GPU-x"].gpu_util: not a number,
// got true'); nothing of a refused request is stored.
//
// This is a decoder of a stranger's bytes (fuzz/trial_metrics_fuzz.cc).
//
// Thread-safety: pure functions.
#ifndef METRICS_SERVER_PLATFORM_TRIAL_METRICS_MAPPING_H_
#define METRICS_SERVER_PLATFORM_TRIAL_METRICS_MAPPING_H_

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "proto/determined/api/v1/profiler.pb.h"
#include "common/vocabulary/signals.h"
#include "storage/batch_validation.h"
#include "storage/metric_store.h"

namespace metrics::server {

// The unit of each name the harness sends in a profiling group; others
// have none.
inline constexpr signals::Signal kProfilingUnits[] = {
    signals::kGpuUtil,           signals::kGpuFreeMemory,
    signals::kCpuUtilSimple,     signals::kMemoryFree,
    signals::kDiskIops,          signals::kDiskThroughputRead,
    signals::kDiskThroughputWrite, signals::kDiskUtil,
    signals::kNetThroughputSent, signals::kNetThroughputRecv,
};

// The inventory's sampling text of an agent that reports through it.
inline constexpr absl::string_view kHarnessSampling =
    "means of 1-second readings over about 10 s (the platform's harness "
    "reports each group about every 10 s)";

// A profiling group's report: a batch per agent with values, and how many
// values of each agent were dropped as not finite.
struct ProfilingBatches {
  std::vector<storage::MetricBatch> batches;
  std::vector<std::pair<std::string, int64_t>> dropped;  // (agent, count)
};

struct MappedTrialMetrics {
  int32_t trial_id = 0;
  int32_t run_id = 0;
  std::string group;
  // Exactly one is set.
  std::optional<ProfilingBatches> profiling;
  std::optional<storage::GenericReport> generic;
};

// The series of the disk group's `name` of one mount path:
// "disk_util{mount=/}"; and whether a series name is one of those.
std::string MountSeriesName(absl::string_view name, absl::string_view mount);
bool IsMountSeries(absl::string_view series_name);

// The stream id of an agent's reports of a profiling group. It begins with
// a byte no client's stream id may hold (they are printable ASCII), so no
// other client's stream is ever the same.
std::string ProfilingStreamId(absl::string_view group, absl::string_view agent);

// `request` checked and mapped; `now` is the report's time when it has
// none, and bounds report times as the store does (with `limits`).
absl::StatusOr<MappedTrialMetrics> MapTrialMetrics(
    const determined::api::v1::ReportTrialMetricsRequest& request,
    const storage::IngestLimits& limits, absl::Time now);

}  // namespace metrics::server

#endif  // METRICS_SERVER_PLATFORM_TRIAL_METRICS_MAPPING_H_
