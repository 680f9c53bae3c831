#include "migrations/database_admin.h"

#include <pqxx/connection>
#include <pqxx/nontransaction>

#include <algorithm>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "storage/pg/connection.h"
#include "storage/pg/pg_errors.h"

namespace metrics::migrations {

namespace {

absl::Status RunOnServer(const std::string& server_url,
                         absl::string_view operation,
                         const std::string& statement) {
  ASSIGN_OR_RETURN(std::unique_ptr<pqxx::connection> conn,
                   storage::pg::Connect(server_url, "metrics-admin"));
  return storage::pg::GuardPg(operation, [&] {
    // CREATE/DROP DATABASE cannot run inside a transaction block.
    pqxx::nontransaction tx(*conn);
    tx.exec(statement);
    return absl::OkStatus();
  });
}

// Quotes a libpq key=value value.
std::string QuoteConninfoValue(absl::string_view value) {
  std::string out = "'";
  for (char c : value) {
    if (c == '\'' || c == '\\') out += '\\';
    out += c;
  }
  return out + "'";
}

}  // namespace

absl::Status CreateDatabase(const std::string& server_url,
                            absl::string_view name) {
  return RunOnServer(server_url, absl::StrCat("creating database ", name),
                     absl::StrCat("CREATE DATABASE \"", name,
                                  "\" TEMPLATE template0"));
}

absl::Status CopyDatabase(const std::string& server_url, absl::string_view name,
                          absl::string_view source) {
  return RunOnServer(server_url, absl::StrCat("copying database ", source, " to ", name),
                     absl::StrCat("CREATE DATABASE \"", name, "\" TEMPLATE \"", source,
                                  "\" STRATEGY = FILE_COPY"));
}

absl::Status RenameDatabase(const std::string& server_url, absl::string_view from,
                            absl::string_view to) {
  return RunOnServer(server_url, absl::StrCat("renaming database ", from, " to ", to),
                     absl::StrCat("ALTER DATABASE \"", from, "\" RENAME TO \"", to, "\""));
}

absl::StatusOr<bool> DatabaseExists(const std::string& server_url, absl::string_view name) {
  ASSIGN_OR_RETURN(std::unique_ptr<pqxx::connection> conn,
                   storage::pg::Connect(server_url, "metrics-admin"));
  return storage::pg::GuardPg(
      absl::StrCat("looking for database ", name), [&]() -> absl::StatusOr<bool> {
        pqxx::nontransaction tx(*conn);
        return !tx.exec_params("SELECT 1 FROM pg_database WHERE datname = $1", std::string(name))
                    .empty();
      });
}

absl::Status WithServerLock(const std::string& server_url, int64_t key,
                            absl::FunctionRef<absl::Status()> fn) {
  ASSIGN_OR_RETURN(std::unique_ptr<pqxx::connection> conn,
                   storage::pg::Connect(server_url, "metrics-admin"));
  RETURN_IF_ERROR(storage::pg::GuardPg("taking a server lock", [&] {
    pqxx::nontransaction(*conn).exec_params("SELECT pg_advisory_lock($1)", key);
    return absl::OkStatus();
  }));
  // The lock ends with the session, whatever fn does.
  return fn();
}

absl::Status DropDatabase(const std::string& server_url,
                          absl::string_view name) {
  return RunOnServer(server_url, absl::StrCat("dropping database ", name),
                     absl::StrCat("DROP DATABASE IF EXISTS \"", name,
                                  "\" WITH (FORCE)"));
}

std::string UrlForDatabase(const std::string& server_url,
                           absl::string_view name) {
  absl::string_view url = server_url;
  if (absl::StartsWith(url, "postgres://") ||
      absl::StartsWith(url, "postgresql://")) {
    // URI: replace the path (the database) and keep authority and query.
    const size_t authority = url.find("://") + 3;
    const size_t query = std::min(url.find('?', authority), url.size());
    const size_t path = std::min(url.find('/', authority), query);
    return absl::StrCat(url.substr(0, path), "/", name, url.substr(query));
  }
  // key=value string (or empty for the PG* variables): a later dbname wins.
  return absl::StrCat(url, url.empty() ? "" : " ",
                      "dbname=", QuoteConninfoValue(name));
}

}  // namespace metrics::migrations
