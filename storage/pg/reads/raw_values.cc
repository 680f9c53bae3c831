#include "storage/pg/reads/raw_values.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "storage/format/packed_report.h"
#include "storage/pg/sql_arrays.h"
#include "storage/report_json.h"

namespace metrics::storage::pg {

std::string SystemRowsOfAgentSql(absl::string_view agent) {
  // The hash keys the index (4 bytes instead of the agent's name, often a
  // host name of 20-30); the name itself tells colliding agents apart.
  return absl::StrCat("metric_group = 'system' AND hashtext(agent_id) = "
                      "hashtext(", agent, ") AND agent_id = ", agent);
}

RawValueColumns::RawValueColumns(pqxx::transaction_base& tx,
                                 const std::vector<Series>& series) {
  sql_ = "packed_values";
  for (size_t i = 0; i < series.size(); ++i) {
    absl::StrAppend(&sql_, ", ",
                    ReportValueSql("metrics", tx.quote(series[i].name),
                                   tx.quote(series[i].gpu_uuid)));
    by_id_.emplace_back(series[i].id, i);
  }
  std::sort(by_id_.begin(), by_id_.end());
}

absl::Status RawValueColumns::Read(
    const pqxx::row& row, int first,
    absl::FunctionRef<void(size_t, double)> found) const {
  const pqxx::field packed = row[first];
  if (packed.is_null()) {  // a row of the jsonb form
    for (size_t i = 0; i < by_id_.size(); ++i) {
      const pqxx::field value = row[first + 1 + static_cast<int>(i)];
      if (!value.is_null()) found(i, value.as<double>());
    }
    return absl::OkStatus();
  }
  absl::StatusOr<std::vector<SeriesValue>> values =
      UnpackReport(DecodeByteaHex(packed.c_str()));
  if (!values.ok()) return values.status();
  Pick(*values, found);
  return absl::OkStatus();
}

void RawValueColumns::Pick(const std::vector<std::pair<int64_t, double>>& values,
                           absl::FunctionRef<void(size_t, double)> found) const {
  // Both lists ascend by id: one merge pass.
  auto want = by_id_.begin();
  for (const auto& [id, value] : values) {
    while (want != by_id_.end() && want->first < id) ++want;
    if (want == by_id_.end()) break;
    for (auto same = want; same != by_id_.end() && same->first == id; ++same) {
      found(same->second, value);
    }
  }
}

}  // namespace metrics::storage::pg
