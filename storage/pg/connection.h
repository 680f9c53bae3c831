// Opens a PostgreSQL connection configured the way every part of the service
// wants it: JIT off (it costs 15-560 ms on mid-size queries and buys nothing
// for ours), an application_name that shows in pg_stat_activity, the
// caller's settings and its prepared statements.
//
// Thread-safety: the returned connection belongs to one thread at a time
// (libpqxx's rule); Connect itself is thread-safe.
#ifndef METRICS_STORAGE_PG_CONNECTION_H_
#define METRICS_STORAGE_PG_CONNECTION_H_

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <pqxx/connection>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "storage/pg/prepared.h"

namespace metrics::storage::pg {

// A setting of the session (`SET name = value`), made before the
// statements are prepared.
using SessionSetting = std::pair<std::string, std::string>;

// Connects to `url` (a libpq URI or keyword string; empty means the PG*
// environment variables). Returns UNAVAILABLE when the server cannot be
// reached (the message names host and port, as libpq does),
// PERMISSION_DENIED when it refuses the login.
absl::StatusOr<std::unique_ptr<pqxx::connection>> Connect(
    const std::string& url, absl::string_view application_name,
    const std::vector<PreparedStatement>& statements = {},
    const std::vector<SessionSetting>& settings = {});

// The settings of connections whose statements all find rows by key (the
// ingest writer's, the service's reads): no sequential scans. A prepared
// statement settles on the plan it made for the tables as they were then;
// made while a table was a page or two (a new database, before autovacuum
// first analyzed it), that was a sequential scan, kept as the table grew:
// at 4000 new streams, each stream's position cost a scan of 60-86 pages,
// 8.6 ms a group commit, and ingest fell behind (docs/benchmarks.md,
// "Statements that stay index probes").
std::vector<SessionSetting> KeyedAccessSettings();

// `url` with libpq connection options added (or replacing its own), as a
// keyword string: for example {"connect_timeout", "5"}. INVALID_ARGUMENT
// when libpq cannot parse `url`.
absl::StatusOr<std::string> WithConnectionOptions(
    const std::string& url,
    const std::vector<std::pair<std::string, std::string>>& options);

}  // namespace metrics::storage::pg

#endif  // METRICS_STORAGE_PG_CONNECTION_H_
