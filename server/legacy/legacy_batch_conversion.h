// The legacy profiler API's ingest request turned into the new ingest's
// batches: each legacy batch is one series (labels plus parallel values,
// training batches and timestamps); they are checked whole, then built into
// batches by storage/batch_builder.h: one per trial, agent and metric type
// (split at the ingest limits), readings of one instant and training batch
// sharing a report. Names and units follow storage/legacy_profiler.h.
//
// This is a decoder of a stranger's bytes (fuzz/legacy_request_fuzz.cc).
//
// Thread-safety: stateless functions, thread-safe.
#ifndef METRICS_SERVER_LEGACY_LEGACY_BATCH_CONVERSION_H_
#define METRICS_SERVER_LEGACY_LEGACY_BATCH_CONVERSION_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "proto/determined/api/v1/profiler.pb.h"
#include "storage/batch_validation.h"
#include "storage/metric_store.h"

namespace metrics::server {

// The metric group a legacy metric type is stored under, or nothing for
// PROFILER_METRIC_TYPE_UNSPECIFIED and unknown values.
std::optional<std::string> GroupOfLegacyMetricType(
    determined::trial::v1::TrialProfilerMetricLabels::ProfilerMetricType type);

// INVALID_ARGUMENT naming `field` unless `trial_id` is positive.
absl::Status CheckLegacyTrialId(absl::string_view field, int32_t trial_id);

// The batches of `request`, each valid under `limits` as the store checks
// it; INVALID_ARGUMENT naming the first bad field otherwise (then nothing of
// the request may be stored).
absl::StatusOr<std::vector<storage::MetricBatch>> ConvertLegacyRequest(
    const determined::api::v1::PostTrialProfilerMetricsBatchRequest& request,
    const storage::IngestLimits& limits);

}  // namespace metrics::server

#endif  // METRICS_SERVER_LEGACY_LEGACY_BATCH_CONVERSION_H_
