// The sealer: turns each agent's closed windows of raw system rows into
// sealed windows (storage/format/sealed_window.h), one row a window holding
// every report of it, and deletes the rows it took, in one transaction; a
// window sealed before and reached by late rows is sealed again with them.
// The same transaction adds the rows' values to the rollups
// (sealed_rollups.h): ingest writes none. Each transaction holds the
// agent's rollup advisory lock (the one rollup rebuilds take), so two
// sealers, in one metricsd or several, never seal the same rows twice, and
// a seal cut off by a crash leaves nothing behind: the next pass does the
// whole window again.
//
// A window is closed once its end is `grace` past the database's clock: a
// report later than that into it stays raw until the next pass.
//
// Thread-safety: thread-safe; each call uses a connection of its own.
#ifndef METRICS_STORAGE_PG_JOBS_SEALER_H_
#define METRICS_STORAGE_PG_JOBS_SEALER_H_

#include <cstdint>
#include <functional>
#include <string>
#include <thread>

#include "absl/status/statusor.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"

namespace metrics::storage::pg {

struct SealProgress {
  int32_t trial_id = 0;
  std::string agent_id;
  int agents_done = 0;
  int agents_total = 0;
  int64_t windows = 0;  // sealed so far
  int64_t rows = 0;     // raw rows taken so far
};

struct SealOptions {
  std::string database_url;
  // The connection's application_name (pg_stat_activity).
  std::string application_name = "metrics-sealer";
  // How long after its end a window is sealed.
  absl::Duration grace = absl::Minutes(2);
  // Windows of one agent sealed per transaction at most.
  int windows_per_transaction = 3;
  // Called after each transaction, on the caller's thread (optional).
  std::function<void(const SealProgress&)> progress;
  // Checked between transactions; true stops the pass there (optional).
  std::function<bool()> interrupted;
  // VACUUM the profiling partition after a pass that took raw rows: their
  // dead entries in the index of raw rows are stepped over by every read
  // of the rows waiting for a seal until vacuum removes them (a bulk seal
  // of history left millions; a seal a minute leaves them to autovacuum).
  bool vacuum_after = false;
};

struct SealSummary {
  int agents = 0;        // agents that had rows to seal
  int64_t windows = 0;   // windows sealed (again, for late rows)
  int64_t rows = 0;      // raw rows taken
  int64_t reports = 0;   // reports in the windows written
  int64_t raw_bytes = 0;     // packed values taken
  int64_t sealed_bytes = 0;  // sealed values written (including the windows' earlier reports)
  bool vacuumed = false;
};

// One pass over every agent with raw rows in closed windows.
absl::StatusOr<SealSummary> SealClosedWindows(const SealOptions& options);

// Runs a pass now and then every `every` on a thread of its own, until
// destroyed; passes that sealed something or failed go to `log`.
class SealerLoop {
 public:
  SealerLoop(SealOptions options, absl::Duration every,
             std::function<void(const std::string&)> log);
  ~SealerLoop();  // stops the pass in progress between transactions

 private:
  absl::Notification stop_;
  std::thread thread_;
};

}  // namespace metrics::storage::pg

#endif  // METRICS_STORAGE_PG_JOBS_SEALER_H_
