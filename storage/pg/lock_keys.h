// Advisory lock keys: stable 64-bit values, the same in every metricsd and
// metricsctl, so the writers of several processes (the ingest writers of
// every replica, rollup rebuilds) take turns on the same stream or agent.
//
// Thread-safety: pure function.
#ifndef METRICS_STORAGE_PG_LOCK_KEYS_H_
#define METRICS_STORAGE_PG_LOCK_KEYS_H_

#include <cstdint>

#include "absl/strings/string_view.h"

namespace metrics::storage::pg {

// Serialises rollup upkeep of one agent of one trial.
int64_t RollupLockKey(int32_t trial_id, absl::string_view agent_id);

// Serialises the commits of one client stream's batches.
int64_t StreamLockKey(int32_t trial_id, absl::string_view stream_id);

}  // namespace metrics::storage::pg

#endif  // METRICS_STORAGE_PG_LOCK_KEYS_H_
