// The trials table's columns as the store reads them, shared by the trial
// writes (PgMetricStore) and reads (PgReads).
//
// Thread-safety: pure functions.
#ifndef METRICS_STORAGE_PG_TRIAL_ROWS_H_
#define METRICS_STORAGE_PG_TRIAL_ROWS_H_

#include <pqxx/row>

#include <string>

#include "storage/metric_store.h"

namespace metrics::storage::pg {

// The columns TrialFromRow maps, for a SELECT or RETURNING list; a query's
// own columns come after them, from index kTrialColumns.
std::string TrialColumnsSql();
inline constexpr int kTrialColumns = 6;

// Maps a row whose first columns are TrialColumnsSql's.
Trial TrialFromRow(const pqxx::row& row);

}  // namespace metrics::storage::pg

#endif  // METRICS_STORAGE_PG_TRIAL_ROWS_H_
