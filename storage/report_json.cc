#include "storage/report_json.h"

#include "absl/strings/str_cat.h"

namespace metrics::storage {

std::string ReportValueSql(absl::string_view column, absl::string_view name,
                           absl::string_view gpu_uuid) {
  // With literals the planner folds the CASE to one branch.
  return absl::StrCat("(CASE WHEN ", gpu_uuid, " <> '' THEN ", column, " -> ",
                      name, " ->> ", gpu_uuid, " WHEN jsonb_typeof(", column,
                      " -> ", name, ") = 'object' THEN ", column, " -> ", name,
                      " ->> '' ELSE ", column, " ->> ", name, " END)::float8");
}

}  // namespace metrics::storage
