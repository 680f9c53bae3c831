// Reading the jsonb form of a system-metrics report, as the generic
// `metrics` table held it before migration 0004 (rows written since keep
// their values packed, packed_report.h) and as the view metrics_unpacked
// still gives every row: {"cpu_util_simple": 12.5, "gpu_util": {"GPU-0": 97}}.
// Names map to numbers; a name with GPU values maps to an object of GPU
// UUID to number, where an agent-wide value of the same name sits under "".
//
// Thread-safety: pure functions.
#ifndef METRICS_STORAGE_REPORT_JSON_H_
#define METRICS_STORAGE_REPORT_JSON_H_

#include <string>

#include "absl/strings/string_view.h"

namespace metrics::storage {

// The SQL expression (float8, NULL when absent) of one series' value in the
// jsonb `column` of a row of that form. `name` and `gpu_uuid` are SQL
// expressions too: quoted literals, parameters or columns; a gpu_uuid of ''
// reads the agent-wide value.
std::string ReportValueSql(absl::string_view column, absl::string_view name,
                           absl::string_view gpu_uuid);

}  // namespace metrics::storage

#endif  // METRICS_STORAGE_REPORT_JSON_H_
