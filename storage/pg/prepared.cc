#include "storage/pg/prepared.h"

namespace metrics::storage::pg {

void Prepare(pqxx::connection& conn,
             const std::vector<PreparedStatement>& statements) {
  for (const PreparedStatement& s : statements) conn.prepare(s.name, s.sql);
}

}  // namespace metrics::storage::pg
