// Fuzz target: OTLP/HTTP bodies as strangers send them (POST /v1/metrics)
// and their mapping to the service's batches (server/otlp/). The first
// byte picks the encoding (protobuf or JSON, gzip or not), the rest is the
// body. Any body may be refused; none may crash, inflate past the limit,
// or map to a batch the store would refuse for its labels or times.
#include <cstddef>
#include <cstdint>

#include "absl/time/clock.h"
#include "server/otlp/otlp_body.h"
#include "server/otlp/otlp_mapping.h"
#include "storage/batch_validation.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const uint8_t mode = data[0];
  const absl::string_view body(reinterpret_cast<const char*>(data) + 1, size - 1);
  auto request = metrics::server::DecodeOtlpBody(
      mode & 1 ? "application/json" : "application/x-protobuf",
      mode & 2 ? "gzip" : "", body, /*max_bytes=*/1 << 20);
  if (!request.ok()) return 0;
  static auto* rates = new metrics::server::RateState(1000);
  const metrics::storage::IngestLimits limits;
  const absl::Time now = absl::Now();
  const metrics::server::OtlpBatches mapped =
      metrics::server::MapExport(*request, *rates, limits, now,
                                 mode & 4 ? std::optional<int32_t>(7) : std::nullopt);
  for (const metrics::storage::MetricBatch& batch : mapped.batches) {
    if (mode & 4 && batch.trial_id != 7) __builtin_trap();
    if (!metrics::storage::ValidateBatch(batch, limits, now).ok()) __builtin_trap();
  }
  if (mapped.reasons.size() > 5) __builtin_trap();
  return 0;
}
