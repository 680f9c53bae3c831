#include "storage/pg/reads/read_base.h"

#include <pqxx/result>

namespace metrics::storage::pg {

SeriesInfo SeriesFromRow(const pqxx::row& row, int first) {
  SeriesInfo info;
  info.series_id = row[first].as<int64_t>();
  info.metric_group = row[first + 1].as<std::string>();
  info.agent_id = row[first + 2].as<std::string>();
  info.gpu_uuid = row[first + 3].as<std::string>();
  info.name = row[first + 4].as<std::string>();
  info.unit = row[first + 5].as<std::string>();
  return info;
}

const PreparedStatement& TrialExistsStatement() {
  static const auto* statement =
      new PreparedStatement{"trial_exists", "SELECT 1 FROM trials WHERE id = $1"};
  return *statement;
}

absl::Status CheckTrialExists(pqxx::transaction_base& tx, int32_t trial_id) {
  if (tx.exec_prepared(TrialExistsStatement().name, trial_id).empty()) {
    return absl::NotFoundError(absl::StrCat("trial ", trial_id, " does not exist"));
  }
  return absl::OkStatus();
}

}  // namespace metrics::storage::pg
