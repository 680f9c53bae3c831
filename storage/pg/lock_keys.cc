#include "storage/pg/lock_keys.h"

#include <string>

#include "absl/strings/str_cat.h"

namespace metrics::storage::pg {

int64_t RollupLockKey(int32_t trial_id, absl::string_view agent_id) {
  uint64_t hash = 1469598103934665603ull;  // FNV-1a: stable across processes
  const std::string text = absl::StrCat("rollup:", trial_id, ":", agent_id);
  for (unsigned char c : text) {
    hash ^= c;
    hash *= 1099511628211ull;
  }
  return static_cast<int64_t>(hash);
}

}  // namespace metrics::storage::pg
