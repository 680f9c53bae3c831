// Fuzz target: the platform's ReportTrialMetrics, as its harness posts it.
// Arbitrary bytes are read as the route's JSON body (with its rules: Python's
// NaN and Infinity tokens taken, Struct fields) and mapped to the store's
// terms. A request that maps must come out as a profiling report of valid
// batches, one report of one agent each and no agent twice, or as a generic
// report whose JSON texts read back.
#include <google/protobuf/struct.pb.h>
#include <google/protobuf/util/json_util.h>

#include <cstddef>
#include <cstdint>
#include <set>
#include <string>

#include "absl/strings/string_view.h"
#include "absl/time/clock.h"
#include "proto/determined/api/v1/profiler.pb.h"
#include "server/platform/trial_metrics_mapping.h"
#include "server/rest/json_body.h"
#include "storage/batch_validation.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  determined::api::v1::ReportTrialMetricsRequest request;
  metrics::server::JsonBodyOptions options;
  options.python_non_finite = true;
  if (!metrics::server::ParseJsonBody(
           absl::string_view(reinterpret_cast<const char*>(data), size), {}, &request,
           options)
           .ok()) {
    return 0;
  }
  const metrics::storage::IngestLimits limits;
  const absl::Time now = absl::Now();
  const auto mapped = metrics::server::MapTrialMetrics(request, limits, now);
  if (!mapped.ok()) return 0;
  if (mapped->profiling.has_value() == mapped->generic.has_value()) __builtin_trap();
  if (mapped->profiling.has_value()) {
    std::set<std::string> agents;
    for (const metrics::storage::MetricBatch& batch : mapped->profiling->batches) {
      if (!metrics::storage::ValidateBatch(batch, limits, now).ok()) {
        __builtin_trap();  // a mapped batch the store would refuse
      }
      if (batch.reports.size() != 1 || !batch.sequence_is_time) __builtin_trap();
      if (!agents.insert(batch.agent_id).second) __builtin_trap();  // split report
    }
    return 0;
  }
  google::protobuf::Struct avg;
  if (!google::protobuf::util::JsonStringToMessage(mapped->generic->avg_metrics, &avg).ok()) {
    __builtin_trap();  // a row the store could not take
  }
  return 0;
}
