#include "storage/report_json.h"

#include <utility>
#include <vector>

#include "absl/container/btree_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "common/json_text.h"

namespace metrics::storage {

std::string ReportJson(const MetricBatch& batch, const Report& report) {
  absl::btree_map<absl::string_view,
                  std::vector<std::pair<absl::string_view, double>>>
      by_name;
  for (size_t v = 0; v < report.values.size(); ++v) {
    const SeriesDeclaration& s = batch.series[report.series[v]];
    by_name[s.name].emplace_back(s.gpu_uuid, report.values[v]);
  }
  std::string json = "{";
  for (const auto& [name, values] : by_name) {
    if (json.size() > 1) json += ',';
    common::AppendJsonString(json, name);
    json += ':';
    if (values.size() == 1 && values[0].first.empty()) {
      common::AppendJsonNumber(json, values[0].second);
      continue;
    }
    json += '{';
    for (size_t i = 0; i < values.size(); ++i) {
      if (i > 0) json += ',';
      common::AppendJsonString(json, values[i].first);
      json += ':';
      common::AppendJsonNumber(json, values[i].second);
    }
    json += '}';
  }
  return json + "}";
}

std::string ReportValueSql(absl::string_view column, absl::string_view name,
                           absl::string_view gpu_uuid) {
  // With literals the planner folds the CASE to one branch.
  return absl::StrCat("(CASE WHEN ", gpu_uuid, " <> '' THEN ", column, " -> ",
                      name, " ->> ", gpu_uuid, " WHEN jsonb_typeof(", column,
                      " -> ", name, ") = 'object' THEN ", column, " -> ", name,
                      " ->> '' ELSE ", column, " ->> ", name, " END)::float8");
}

}  // namespace metrics::storage
