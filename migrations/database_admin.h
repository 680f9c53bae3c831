// Creates and drops whole databases on a PostgreSQL server: what the test
// fixtures use to give each test binary a database of its own.
//
// Thread-safety: thread-safe; each call uses a connection of its own.
#ifndef METRICS_MIGRATIONS_DATABASE_ADMIN_H_
#define METRICS_MIGRATIONS_DATABASE_ADMIN_H_

#include <string>
#include "absl/strings/string_view.h"

#include "absl/status/status.h"

namespace metrics::migrations {

// Creates database `name` from template0 through the server that
// `server_url` reaches (any database on it, "" for the PG* variables).
// ALREADY_EXISTS if it exists.
absl::Status CreateDatabase(const std::string& server_url,
                            absl::string_view name);

// Drops database `name`, ending its other sessions first. OK if absent.
absl::Status DropDatabase(const std::string& server_url,
                          absl::string_view name);

// `server_url` (a libpq URI, key=value string, or "" for the PG* variables)
// with its database replaced by `name`, every other setting kept.
std::string UrlForDatabase(const std::string& server_url,
                           absl::string_view name);

}  // namespace metrics::migrations

#endif  // METRICS_MIGRATIONS_DATABASE_ADMIN_H_
