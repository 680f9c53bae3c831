// The one-off move of the old profiler's table (trial_profiler_metrics)
// into the new storage, for `metricsctl legacy move`.
//
// Each legacy row (one series' readings) becomes ingest batches on its own
// stream, "legacy-move/<row id>", through the normal ingest path: raw rows in
// the metric group of its type (system, timing, misc) with the training
// batch index in total_batches, series registry, rollups for system series,
// and the stream's position in the same transaction. So the move is
// - lossless: every reading, no thinning (non-finite readings, which the new
//   storage cannot hold, are counted and reported, not dropped silently);
// - idempotent: a row already moved comes back as a duplicate and changes
//   nothing;
// - resumable: after Ctrl-C or a killed process, a new run skips what was
//   committed and goes on.
// Names and units follow storage/legacy_profiler.h. Rows are read by id in
// chunks, so memory is bounded; trials the service does not know yet are
// registered as COMPLETED (their data is history), and moved data is
// accepted for terminal trials.
//
// Thread-safety: thread-safe; uses connections of its own.
#ifndef METRICS_STORAGE_PG_JOBS_LEGACY_MOVE_H_
#define METRICS_STORAGE_PG_JOBS_LEGACY_MOVE_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace metrics::storage::pg {

struct LegacyMoveProgress {
  int64_t rows_done = 0;
  int64_t rows_total = 0;
  int64_t readings_done = 0;
};

struct LegacyMoveOptions {
  std::string database_url;
  // Legacy rows read and committed per round.
  int rows_per_chunk = 200;
  // Count what would be moved; write nothing.
  bool dry_run = false;
  // Called after each chunk, on the caller's thread (optional).
  std::function<void(const LegacyMoveProgress&)> progress;
  // Checked between chunks; true stops the move there (optional).
  std::function<bool()> interrupted;
};

struct LegacyMoveSummary {
  int64_t rows = 0;           // legacy rows looked at
  int64_t rows_moved = 0;     // moved by this run (dry run: would be)
  int64_t rows_already = 0;   // moved before (dry run: at least in part)
  int64_t rows_refused = 0;   // not movable; see `refusals`
  int64_t readings = 0;       // readings moved by this run (dry run: would be)
  int64_t readings_not_finite = 0;  // NaN or infinite: not stored
  int64_t trials = 0;          // distinct trials in the legacy table
  int64_t trials_created = 0;  // registered by this run (dry run: would be)
  std::vector<std::string> refusals;  // "row <id>: <why>", the first 100
  bool interrupted = false;
};

// FAILED_PRECONDITION when the schema is missing; the database's errors
// otherwise (a run that fails can be run again).
absl::StatusOr<LegacyMoveSummary> MoveLegacyProfilerData(
    const LegacyMoveOptions& options);

}  // namespace metrics::storage::pg

#endif  // METRICS_STORAGE_PG_JOBS_LEGACY_MOVE_H_
