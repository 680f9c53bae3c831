// The jsonb text of one system-metrics report as stored in the generic
// `metrics` table: {"cpu_util_simple": 12.5, "gpu_util": {"GPU-0": 97}}.
// Names map to numbers; a name with GPU values maps to an object of GPU
// UUID to number, where an agent-wide value of the same name sits under "".
// Numbers are written in their shortest exact form, so reading them back
// gives the same doubles. The format is written (ReportJson) and read back
// in SQL (ReportValueSql) here only.
//
// Thread-safety: pure functions.
#ifndef METRICS_STORAGE_REPORT_JSON_H_
#define METRICS_STORAGE_REPORT_JSON_H_

#include <string>

#include "absl/strings/string_view.h"

#include "storage/metric_store.h"

namespace metrics::storage {

// REQUIRES: `report` is valid for `batch` (ValidateBatch).
std::string ReportJson(const MetricBatch& batch, const Report& report);

// The SQL expression (float8, NULL when absent) of one series' value in the
// jsonb `column` of a row written by ReportJson. `name` and `gpu_uuid` are
// SQL expressions too: quoted literals, parameters or columns; a gpu_uuid
// of '' reads the agent-wide value.
std::string ReportValueSql(absl::string_view column, absl::string_view name,
                           absl::string_view gpu_uuid);

}  // namespace metrics::storage

#endif  // METRICS_STORAGE_REPORT_JSON_H_
