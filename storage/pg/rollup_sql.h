// SQL shared by the writer and the readers of system_rollups: each agent's
// newest rollup row of one width, one backward probe of the primary key
// (trial_id, agent_id, width_s, bucket_start) per agent.
//
// Thread-safety: pure functions.
#ifndef METRICS_STORAGE_PG_ROLLUP_SQL_H_
#define METRICS_STORAGE_PG_ROLLUP_SQL_H_

#include <string>

#include "absl/strings/string_view.h"

namespace metrics::storage::pg {

// The newest rollup row of width `width` (SQL: a parameter or a number) of
// each (trial_id, agent_id) row of `agents_sql`, as trial_id, agent_id,
// stats, start_us, then with `with_row_address` the row's ctid. An agent
// with no such row is left out, or with `keep_agents_without_row` kept with
// NULL stats.
std::string NewestRollupRowsSql(absl::string_view agents_sql,
                                absl::string_view width,
                                bool keep_agents_without_row = false,
                                bool with_row_address = false);

}  // namespace metrics::storage::pg

#endif  // METRICS_STORAGE_PG_ROLLUP_SQL_H_
