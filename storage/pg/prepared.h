// Prepared statements: a component names its hot statements once, with
// their SQL beside the code that runs them, and its connections prepare
// them when opened (Connect's hook), so each call skips parsing and
// planning. Run one with tx.exec_prepared(statement.name, args...).
//
// Thread-safety: a PreparedStatement is an immutable value; Prepare uses one
// connection (libpqxx's rule: one thread at a time).
#ifndef METRICS_STORAGE_PG_PREPARED_H_
#define METRICS_STORAGE_PG_PREPARED_H_

#include <pqxx/connection>
#include <string>
#include <vector>

namespace metrics::storage::pg {

struct PreparedStatement {
  std::string name;
  std::string sql;
};

// Throws libpqxx's exceptions: callers run it under GuardPg (Connect does).
void Prepare(pqxx::connection& conn,
             const std::vector<PreparedStatement>& statements);

}  // namespace metrics::storage::pg

#endif  // METRICS_STORAGE_PG_PREPARED_H_
