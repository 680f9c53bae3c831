#include "storage/pg/trial_rows.h"

#include "absl/strings/str_cat.h"
#include "storage/pg/sql_time.h"

namespace metrics::storage::pg {

std::string TrialColumnsSql() {
  return absl::StrCat("id, state, ", EpochMicrosSql("created_at"), ", ",
                      EpochMicrosSql("updated_at"), ", ",
                      EpochMicrosSql("ended_at"), ", run_id");
}

Trial TrialFromRow(const pqxx::row& row) {
  Trial trial;
  trial.id = row[0].as<int32_t>();
  // The table's CHECK admits only the states' names.
  trial.state = ParseTrialState(row[1].as<std::string>())
                    .value_or(TrialState::kActive);
  trial.created_at_us = row[2].as<int64_t>();
  trial.updated_at_us = row[3].as<int64_t>();
  if (!row[4].is_null()) trial.ended_at_us = row[4].as<int64_t>();
  if (!row[5].is_null()) trial.run_id = row[5].as<int32_t>();
  return trial;
}

}  // namespace metrics::storage::pg
