// Chooses the database connection string the same way for every program:
// an explicit --database-url wins, then $DATABASE_URL, and otherwise the
// empty string, which makes libpq read its PG* variables (PGHOST, PGPORT,
// PGUSER, PGDATABASE, PGPASSWORD, ...).
//
// Thread-safety: reads the environment; call before starting threads that
// modify it (none of ours do).
#ifndef METRICS_COMMON_DATABASE_URL_H_
#define METRICS_COMMON_DATABASE_URL_H_

#include <string>
#include "absl/strings/string_view.h"

namespace metrics::common {

std::string ResolveDatabaseUrl(absl::string_view flag_value);

}  // namespace metrics::common

#endif  // METRICS_COMMON_DATABASE_URL_H_
