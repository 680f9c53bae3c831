// Fuzz target: the legacy profiler API's ingest conversion. Arbitrary bytes
// are parsed as a PostTrialProfilerMetricsBatchRequest (what an old client
// sends, over gRPC or as JSON through the REST gateway) and converted into
// the new ingest's batches. A request that converts must come out as valid
// batches holding every reading it sent, once.
#include <cstddef>
#include <cstdint>

#include "absl/time/clock.h"
#include "proto/determined/api/v1/profiler.pb.h"
#include "server/legacy/legacy_batch_conversion.h"
#include "storage/batch_validation.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  determined::api::v1::PostTrialProfilerMetricsBatchRequest request;
  if (!request.ParseFromArray(data, static_cast<int>(size))) return 0;
  // Small limits, so that splitting into several batches is reached.
  metrics::storage::IngestLimits limits;
  limits.max_reports_per_batch = 3;
  const auto batches = metrics::server::ConvertLegacyRequest(request, limits);
  if (!batches.ok()) return 0;
  size_t readings_in = 0;
  for (const auto& legacy : request.batches()) readings_in += legacy.values_size();
  size_t readings_out = 0;
  for (const metrics::storage::MetricBatch& batch : *batches) {
    if (!metrics::storage::ValidateBatch(batch, limits, absl::Now()).ok()) {
      __builtin_trap();  // a converted batch the store would refuse
    }
    for (const metrics::storage::Report& report : batch.reports) {
      readings_out += report.values.size();
    }
  }
  if (readings_in != readings_out) __builtin_trap();  // a reading lost or doubled
  return 0;
}
