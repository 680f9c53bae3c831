// Batches shaped like a real agent's: 9 host series (CPU, memory, disk,
// network, ...) and 2 per GPU (utilisation, free memory) for 8 GPUs, so 25
// values a report, as the design's figures assume. For benchmarks and
// end-to-end tests.
//
// Thread-safety: pure functions.
#ifndef METRICS_TESTS_TESTING_REALISTIC_BATCH_H_
#define METRICS_TESTS_TESTING_REALISTIC_BATCH_H_

#include <cstdint>

#include "absl/time/time.h"
#include "proto/metrics/v1/ingest.pb.h"

namespace metrics::test_util {

inline constexpr int kRealisticGpus = 8;
inline constexpr int kRealisticValuesPerReport = 9 + 2 * kRealisticGpus;

// Declares the 25 series in `batch` (GPU UUIDs "GPU-<gpu_prefix><n>").
void DeclareRealisticSeries(v1::SystemMetricsBatch& batch,
                            absl::string_view gpu_prefix = "");

// Adds a report at `t` with a value for every declared series, derived from
// `seed` (deterministic, varied), in the compact form without series indexes.
void AddRealisticReport(v1::SystemMetricsBatch& batch, absl::Time t,
                        int64_t seed);

}  // namespace metrics::test_util

#endif  // METRICS_TESTS_TESTING_REALISTIC_BATCH_H_
