#include "storage/pg/connection.h"

#include <libpq-fe.h>
#include <pqxx/nontransaction>

#include <map>

#include "absl/strings/str_cat.h"
#include "storage/pg/pg_errors.h"

namespace metrics::storage::pg {

absl::StatusOr<std::unique_ptr<pqxx::connection>> Connect(
    const std::string& url, absl::string_view application_name,
    const std::vector<PreparedStatement>& statements,
    const std::vector<SessionSetting>& settings) {
  return GuardPg(
      "connecting to PostgreSQL",
      [&]() -> absl::StatusOr<std::unique_ptr<pqxx::connection>> {
        auto conn = std::make_unique<pqxx::connection>(url);
        {
          pqxx::nontransaction tx(*conn);
          tx.exec("SET jit = off");
          tx.exec("SELECT set_config('application_name', " +
                  tx.quote(std::string(application_name)) + ", false)");
          for (const auto& [name, value] : settings) {
            tx.exec("SELECT set_config(" + tx.quote(name) + ", " +
                    tx.quote(value) + ", false)");
          }
        }
        Prepare(*conn, statements);
        return conn;
      });
}

std::vector<SessionSetting> KeyedAccessSettings() {
  return {{"enable_seqscan", "off"}};
}

absl::StatusOr<std::string> WithConnectionOptions(
    const std::string& url,
    const std::vector<std::pair<std::string, std::string>>& options) {
  char* error = nullptr;
  PQconninfoOption* parsed = PQconninfoParse(url.c_str(), &error);
  if (parsed == nullptr) {
    const std::string reason = error != nullptr ? error : "out of memory";
    PQfreemem(error);
    return absl::InvalidArgumentError(
        absl::StrCat("database URL: ", reason));
  }
  std::map<std::string, std::string> values;
  for (const PQconninfoOption* o = parsed; o->keyword != nullptr; ++o) {
    if (o->val != nullptr) values[o->keyword] = o->val;
  }
  PQconninfoFree(parsed);
  for (const auto& [key, value] : options) values[key] = value;
  std::string text;
  for (const auto& [key, value] : values) {
    // libpq's keyword syntax: single quotes, with ' and \ escaped.
    absl::StrAppend(&text, text.empty() ? "" : " ", key, "='");
    for (char c : value) {
      if (c == '\'' || c == '\\') text.push_back('\\');
      text.push_back(c);
    }
    text.push_back('\'');
  }
  return text;
}

}  // namespace metrics::storage::pg
