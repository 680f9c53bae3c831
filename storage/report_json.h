// The jsonb text of one system-metrics report as stored in the generic
// `metrics` table: {"cpu_util_simple": 12.5, "gpu_util": {"GPU-0": 97}}.
// Names map to numbers; a name with GPU values maps to an object of GPU
// UUID to number, where an agent-wide value of the same name sits under "".
// Numbers are written in their shortest exact form, so reading them back
// gives the same doubles.
//
// Thread-safety: pure function.
#ifndef METRICS_STORAGE_REPORT_JSON_H_
#define METRICS_STORAGE_REPORT_JSON_H_

#include <string>

#include "storage/metric_store.h"

namespace metrics::storage {

// REQUIRES: `report` is valid for `batch` (ValidateBatch).
std::string ReportJson(const SystemBatch& batch, const Report& report);

}  // namespace metrics::storage

#endif  // METRICS_STORAGE_REPORT_JSON_H_
