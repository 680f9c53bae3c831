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
// Memory: a seal holds at most about `memory_budget_bytes` of reports,
// whatever a window holds. A window with more (an agent reporting thousands
// of times a second, a bulk import) is sealed in parts, each a row of its
// own with the window's start as its end_time, taken in order of time and
// ingest, one transaction a part; readers read a window's parts together.
// Late rows join the window's smallest part while it fits the budget, else
// make a part of their own. SealAgent seals an agent's rows before its
// window closes (SealTrigger says when), in the same parts.
//
// Thread-safety: thread-safe; each call uses a connection of its own.
#ifndef METRICS_STORAGE_PG_JOBS_SEALER_H_
#define METRICS_STORAGE_PG_JOBS_SEALER_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "absl/status/statusor.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "storage/pg/jobs/seal_trigger.h"

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
  // What a transaction's reports may hold in memory, about: the rows read,
  // their decoded reports and the sealed columns made of them. A window
  // larger than this is sealed in parts. 600 reports of 25 values (an
  // 8-GPU agent's window at a report a second) hold about 0.6 MB.
  int64_t memory_budget_bytes = int64_t{32} << 20;
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
  int64_t parts = 0;  // of the windows, rows written beside another row of the same window
  // The most one transaction held, by the estimate the budget is held to.
  int64_t peak_held_bytes = 0;
  bool vacuumed = false;
};

// One pass over every agent with raw rows in closed windows.
absl::StatusOr<SealSummary> SealClosedWindows(const SealOptions& options);

// Seals the raw rows of one agent, its open window's too (options.grace
// is not used), oldest first, until it has taken `max_rows` or none is
// left: what SealTrigger asks for when an agent has many waiting.
absl::StatusOr<SealSummary> SealAgent(const SealOptions& options, int32_t trial,
                                      const std::string& agent, int64_t max_rows);

// Runs a pass now and then every `every` on a thread of its own, until
// destroyed; passes that sealed something or failed go to `log`. With a
// `trigger`, between passes it seals each agent the trigger names as due
// (SealAgent), and tells the trigger what every seal took; early seals
// are counted in the next pass's line of the log.
class SealerLoop {
 public:
  SealerLoop(SealOptions options, absl::Duration every, std::shared_ptr<SealTrigger> trigger,
             std::function<void(const std::string&)> log);
  ~SealerLoop();  // stops the pass in progress between transactions

 private:
  void Run(SealOptions options, absl::Duration every,
           const std::function<void(const std::string&)>& log);

  absl::Notification stop_;
  const std::shared_ptr<SealTrigger> trigger_;
  std::thread thread_;
};

}  // namespace metrics::storage::pg

#endif  // METRICS_STORAGE_PG_JOBS_SEALER_H_
