// Recomputes a trial's rollups from its raw rows and sealed windows: for
// each agent, in one transaction holding the same advisory lock as the
// sealer (so a seal of that agent waits rather than races), it deletes the
// agent's stored rollups (an earlier version's 10 s width too), reads its
// reports in storage order a page at a time (AgentReportScan), and writes
// every bucket of every width afresh from those in the rollups: raw rows
// still waiting for their seal (packed format 2) are left to it. Buckets
// are written as soon as time moves past them, so memory stays bounded for
// any run length. The result equals what the sealer maintained (sums up to
// floating-point rounding: they add in another order).
//
// Thread-safety: thread-safe; uses a connection of its own.
#ifndef METRICS_STORAGE_PG_JOBS_ROLLUP_REBUILD_H_
#define METRICS_STORAGE_PG_JOBS_ROLLUP_REBUILD_H_

#include <cstdint>
#include <functional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace metrics::storage::pg {

struct RebuildProgress {
  std::string agent_id;
  int64_t reports_done = 0;   // reports read so far, all agents
  int64_t reports_total = 0;  // reports of the trial
  int agents_done = 0;
  int agents_total = 0;
};

struct RebuildSummary {
  int agents = 0;
  int64_t reports = 0;  // reports read
  int64_t samples = 0;  // values aggregated
  int64_t buckets = 0;  // rollup rows written
};

// NOT_FOUND for an unknown trial; FAILED_PRECONDITION for one with rollups
// before the raw data horizon (raw-data retention removed their rows). `progress` (optional) is called after
// each block of rows and at each agent's end, on the caller's thread.
absl::StatusOr<RebuildSummary> RebuildRollups(
    const std::string& database_url, int32_t trial_id,
    const std::function<void(const RebuildProgress&)>& progress);

}  // namespace metrics::storage::pg

#endif  // METRICS_STORAGE_PG_JOBS_ROLLUP_REBUILD_H_
