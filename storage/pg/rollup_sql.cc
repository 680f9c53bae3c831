#include "storage/pg/rollup_sql.h"

#include "absl/strings/str_cat.h"
#include "storage/pg/sql_time.h"

namespace metrics::storage::pg {

std::string NewestRollupRowsSql(absl::string_view agents_sql,
                                absl::string_view width,
                                bool keep_agents_without_row,
                                bool with_row_address) {
  const absl::string_view address = with_row_address ? ", r.ctid" : "";
  return absl::StrCat(
      "SELECT a.trial_id, a.agent_id, r.stats, r.start_us", address, " FROM (",
      agents_sql,
      keep_agents_without_row ? ") a LEFT JOIN LATERAL (SELECT r.stats, "
                              : ") a CROSS JOIN LATERAL (SELECT r.stats, ",
      EpochMicrosSql("r.bucket_start"), " AS start_us", address,
      " FROM system_rollups r WHERE r.trial_id = a.trial_id AND "
      "r.agent_id = a.agent_id AND r.width_s = ",
      width, " ORDER BY r.bucket_start DESC LIMIT 1) r",
      keep_agents_without_row ? " ON true" : "");
}

}  // namespace metrics::storage::pg
