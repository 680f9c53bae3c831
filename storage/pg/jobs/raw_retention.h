// Raw-data retention: removes raw system rows older than a limit from the
// profiling partition (sealed windows once all of the window is older),
// keeping the rollups (charts of old windows then load from them) and
// everything else. It seals the closed windows first (sealer.h), so every
// row it removes is in the rollups; a row of a window still open is kept. Before removing anything it records the
// new horizon (raw_retention.horizon), so a query for a window before it
// answers from the rollups instead of reading half-removed raw rows. Rows
// go per trial and agent, in steps of a bounded number of rows, each its
// own short transaction over the index of the agent's rows: no long locks,
// and ingest goes on meanwhile. A VACUUM of the partition at the end makes
// the space reusable by new rows, so the table stops growing at the size of
// the retention window instead of bloating.
//
// Thread-safety: thread-safe; each call uses a connection of its own.
#ifndef METRICS_STORAGE_PG_JOBS_RAW_RETENTION_H_
#define METRICS_STORAGE_PG_JOBS_RAW_RETENTION_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "absl/status/statusor.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace metrics::storage::pg {

struct RetentionProgress {
  int32_t trial_id = 0;
  std::string agent_id;
  int agents_done = 0;
  int agents_total = 0;
  int64_t rows = 0;  // removed so far (or, in a dry run, found)
};

struct RetentionOptions {
  std::string database_url;
  // Raw rows with end_time before now - raw_retention go. Must be positive.
  absl::Duration raw_retention = absl::InfiniteDuration();
  // Count what would go; remove and record nothing.
  bool dry_run = false;
  // Rows removed per transaction.
  int64_t rows_per_step = 10000;
  // Called after each step and each agent, on the caller's thread.
  std::function<void(const RetentionProgress&)> progress;
  absl::Time now = absl::Now();
};

struct RetentionSummary {
  absl::Time horizon;  // raw rows before it are gone (or would be)
  int agents = 0;      // (trial, agent) pairs looked at
  int64_t rows = 0;    // raw rows removed (or, in a dry run, to remove)
  bool vacuumed = false;
};

// INVALID_ARGUMENT for a non-positive or infinite retention. The horizon
// never moves back: a run with a longer retention than an earlier one
// removes nothing the earlier one kept and leaves the horizon where it was.
absl::StatusOr<RetentionSummary> ApplyRawRetention(
    const RetentionOptions& options);

// Applies the retention now and then every `every` on a thread of its own,
// until destroyed; each run's outcome goes to `log`.
class RetentionLoop {
 public:
  RetentionLoop(RetentionOptions options, absl::Duration every,
                std::function<void(const std::string&)> log);
  ~RetentionLoop();  // waits for a run in progress to end

 private:
  absl::Notification stop_;
  std::thread thread_;
};

}  // namespace metrics::storage::pg

#endif  // METRICS_STORAGE_PG_JOBS_RAW_RETENTION_H_
