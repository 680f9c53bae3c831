// Checks a system-metrics batch before anything of it is stored: structure,
// sizes, labels, values and times. Errors are INVALID_ARGUMENT naming the
// field by its path in the API ("batch.reports[3].values[1]: NaN is not a
// finite number"). Checks that need the database (unknown trial, unit
// changed, too many series in a trial) are the store's.
//
// Thread-safety: pure functions.
#ifndef METRICS_STORAGE_BATCH_VALIDATION_H_
#define METRICS_STORAGE_BATCH_VALIDATION_H_

#include <cstddef>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "common/vocabulary/signals.h"
#include "storage/metric_store.h"

namespace metrics::storage {

// The longest name, agent id, GPU UUID or stream id accepted anywhere (the
// signal vocabulary's).
using signals::kMaxLabelLength;

struct IngestLimits {
  size_t max_reports_per_batch = 10000;
  size_t max_values_per_batch = 500000;
  size_t max_series_per_batch = 4096;
  // Names, agent ids, GPU UUIDs and stream ids.
  size_t max_label_length = kMaxLabelLength;
  size_t max_unit_length = signals::kMaxUnitLength;
  // Report times may be at most this far ahead of the server's clock.
  absl::Duration max_future = absl::Minutes(10);
  // Distinct series per trial, enforced by the store (RESOURCE_EXHAUSTED).
  int max_series_per_trial = 10000;
};

// Report times before this are refused (clocks that were never set).
absl::Time EarliestReportTime();

// A label: 1..max_length printable ASCII characters (space allowed inside,
// not at either end); empty too if `allow_empty` (signals::LabelProblem).
absl::Status ValidateLabel(absl::string_view field, absl::string_view value,
                           size_t max_length, bool allow_empty);

absl::Status ValidateBatch(const MetricBatch& batch,
                           const IngestLimits& limits, absl::Time now);

}  // namespace metrics::storage

#endif  // METRICS_STORAGE_BATCH_VALIDATION_H_
