// SealTrigger: counts the system reports stored for each agent since its
// rows were last sealed, and names the agents that have `seal_after` or
// more waiting, so the sealer seals those at once, open window and all,
// instead of at the next pass after their window closes. An agent that
// reports thousands of times a second then keeps a few thousand raw rows
// waiting, not its whole window: what a chart aggregates at read time, and
// what a seal would otherwise take at once, stay bounded whatever the
// density (docs/storage.md, "Sealed windows").
//
// The ingest writer calls Stored after each commit and Admit before it
// queues a batch; the sealer calls Sealed for the rows it took and waits in
// NextDue. Admit refuses an agent with four times `seal_after` waiting of
// which the sealer has taken none for `max_lag`: a sealer that cannot keep
// up (the server's CPU is taken by ingest beyond what both can sustain)
// slows that agent's ingest, through the retry its client is told to make,
// rather than let its raw rows, and what every chart of it aggregates, grow
// without end. A sealer that keeps up (an import in large batches on a
// quiet server) gets there within `max_lag`, and nothing is refused.
//
// The counts are this process's: rows another metricsd stored or sealed
// are not in them, so with several
// servers an agent may be sealed early once in a while for nothing, which
// costs a small extra row (a part) of its window.
//
// Thread-safety: thread-safe. No call touches the database.
#ifndef METRICS_STORAGE_PG_JOBS_SEAL_TRIGGER_H_
#define METRICS_STORAGE_PG_JOBS_SEAL_TRIGGER_H_

#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace metrics::storage::pg {

class SealTrigger {
 public:
  using Agent = std::pair<int32_t, std::string>;  // (trial, agent)

  // Counts at most `max_agents` agents; past it those with fewer than half
  // of `seal_after` waiting are forgotten (about 100 bytes each).
  // REQUIRES: seal_after > 0.
  explicit SealTrigger(int64_t seal_after, absl::Duration max_lag = absl::Milliseconds(250),
                       size_t max_agents = 100000)
      : seal_after_(seal_after), max_lag_(max_lag), max_agents_(max_agents) {}

  // RESOURCE_EXHAUSTED, naming the agent, while it has four times
  // `seal_after` reports waiting for their seal and none was sealed for
  // `max_lag`; it asks the client to retry after kRetryAfter
  // (common::RetryAfterOf).
  absl::Status Admit(int32_t trial, absl::string_view agent) const ABSL_LOCKS_EXCLUDED(mu_);
  // `reports` raw rows of the agent were committed.
  void Stored(int32_t trial, absl::string_view agent, int64_t reports) ABSL_LOCKS_EXCLUDED(mu_);
  // A seal took `rows` of the agent's raw rows (rows another server stored
  // too: the count stops at zero).
  void Sealed(int32_t trial, absl::string_view agent, int64_t rows) ABSL_LOCKS_EXCLUDED(mu_);

  // The next agent due, oldest first, with the reports counted waiting:
  // all stored before its seal starts, so all sealed, by this server or
  // another, once it ends (the sealer tells Sealed at least as many).
  // Waits for one until `deadline` or Stop. Each agent is handed out once
  // per crossing of `seal_after`.
  struct Due {
    Agent agent;
    int64_t waiting = 0;
  };
  std::optional<Due> NextDue(absl::Time deadline) ABSL_LOCKS_EXCLUDED(mu_);
  // Makes NextDue return at once, now and from then on.
  void Stop() ABSL_LOCKS_EXCLUDED(mu_);

  // Agents counted: those with rows stored by this process and not sealed.
  size_t agents() const ABSL_LOCKS_EXCLUDED(mu_);

  static constexpr absl::Duration kRetryAfter = absl::Milliseconds(200);

 private:
  struct Waiting {
    int64_t reports = 0;
    bool due = false;  // in due_
    // When the sealer last took some (or the count began).
    absl::Time since;
  };
  bool DueOrStopped() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return stopped_ || !due_.empty();
  }

  const int64_t seal_after_;
  const absl::Duration max_lag_;
  const size_t max_agents_;
  mutable absl::Mutex mu_;
  absl::flat_hash_map<Agent, Waiting> waiting_ ABSL_GUARDED_BY(mu_);
  std::deque<Agent> due_ ABSL_GUARDED_BY(mu_);
  bool stopped_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace metrics::storage::pg

#endif  // METRICS_STORAGE_PG_JOBS_SEAL_TRIGGER_H_
