// Advisory lock keys shared by everything that writes rollups: stable
// 64-bit values, the same in every metricsd and metricsctl, so the ingest
// writer and a rollup rebuild of the same agent never run at once.
//
// Thread-safety: pure function.
#ifndef METRICS_STORAGE_PG_LOCK_KEYS_H_
#define METRICS_STORAGE_PG_LOCK_KEYS_H_

#include <cstdint>

#include "absl/strings/string_view.h"

namespace metrics::storage::pg {

// Serialises rollup upkeep of one agent of one trial.
int64_t RollupLockKey(int32_t trial_id, absl::string_view agent_id);

}  // namespace metrics::storage::pg

#endif  // METRICS_STORAGE_PG_LOCK_KEYS_H_
