// Fuzz target: the ingest path's decoding of a stranger's stream message.
// Arbitrary bytes are parsed as a StreamSystemMetricsRequest (what a gRPC
// client sends); a batch is converted to the store's form and validated as
// the server does before anything is stored. A batch that passes must have
// every report's values point at declared series.
#include <cstddef>
#include <cstdint>

#include "absl/time/clock.h"
#include "proto/metrics/v1/ingest.pb.h"
#include "server/services/proto_convert.h"
#include "storage/batch_validation.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  metrics::v1::StreamSystemMetricsRequest request;
  if (!request.ParseFromArray(data, static_cast<int>(size))) return 0;
  if (!request.has_batch()) return 0;
  const metrics::storage::MetricBatch batch =
      metrics::server::BatchFromProto(request.batch());
  const metrics::storage::IngestLimits limits;
  if (!metrics::storage::ValidateBatch(batch, limits, absl::Now()).ok()) {
    return 0;
  }
  for (const metrics::storage::Report& report : batch.reports) {
    if (report.series.size() != report.values.size()) __builtin_trap();
    for (uint32_t index : report.series) {
      // Validation let through a value of no declared series.
      if (index >= batch.series.size()) __builtin_trap();
    }
  }
  return 0;
}
