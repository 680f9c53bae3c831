#include "common/database_url.h"

#include <cstdlib>

namespace metrics::common {

std::string ResolveDatabaseUrl(absl::string_view flag_value) {
  if (!flag_value.empty()) return std::string(flag_value);
  if (const char* env = std::getenv("DATABASE_URL"); env != nullptr) {
    return env;
  }
  return "";
}

}  // namespace metrics::common
