#include "storage/pg/connection.h"

#include <pqxx/nontransaction>

#include "storage/pg/pg_errors.h"

namespace metrics::storage::pg {

absl::StatusOr<std::unique_ptr<pqxx::connection>> Connect(
    const std::string& url, absl::string_view application_name,
    const std::vector<PreparedStatement>& statements) {
  return GuardPg(
      "connecting to PostgreSQL",
      [&]() -> absl::StatusOr<std::unique_ptr<pqxx::connection>> {
        auto conn = std::make_unique<pqxx::connection>(url);
        {
          pqxx::nontransaction tx(*conn);
          tx.exec("SET jit = off");
          tx.exec("SELECT set_config('application_name', " +
                  tx.quote(std::string(application_name)) + ", false)");
        }
        Prepare(*conn, statements);
        return conn;
      });
}

}  // namespace metrics::storage::pg
