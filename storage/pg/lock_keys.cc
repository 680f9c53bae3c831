#include "storage/pg/lock_keys.h"

#include <string>

#include "absl/strings/str_cat.h"

namespace metrics::storage::pg {

namespace {

// FNV-1a: stable across processes and builds.
int64_t KeyOf(absl::string_view kind, int32_t trial_id, absl::string_view id) {
  uint64_t hash = 1469598103934665603ull;
  const std::string text = absl::StrCat(kind, ":", trial_id, ":", id);
  for (unsigned char c : text) {
    hash ^= c;
    hash *= 1099511628211ull;
  }
  return static_cast<int64_t>(hash);
}

}  // namespace

int64_t RollupLockKey(int32_t trial_id, absl::string_view agent_id) {
  return KeyOf("rollup", trial_id, agent_id);
}

int64_t StreamLockKey(int32_t trial_id, absl::string_view stream_id) {
  return KeyOf("stream", trial_id, stream_id);
}

}  // namespace metrics::storage::pg
