// Reads from a hot standby: a pool of connections to a PostgreSQL
// streaming-replication standby, and a monitor thread that decides every
// second whether reads may go there. They may while the standby answers, is
// in recovery (a standby, not a second primary) and lags the primary by at
// most `max_lag`; otherwise UseStandby says "the primary", and counts why.
//
// Lag is what a reader would miss: the time since the primary's newest
// commit that the standby does not have. Each check reads the primary's WAL
// position and clock, then asks the standby whether it has replayed that
// position: if so, the standby was current as of that clock reading. If
// not, it is current as of the later of that earlier reading and its last
// replayed commit (pg_last_xact_replay_timestamp(), the primary's commit
// time). So an idle primary is no lag (a replay timestamp alone would grow
// without bound while nothing is written), and a standby that stops
// replaying shows a lag that grows with the clock. When the primary does
// not answer, the lag is unknown and reads stay on the standby, the only
// server that can answer them.
//
// Thread-safety: thread-safe. `on_change` runs on the monitor's thread.
#ifndef METRICS_STORAGE_PG_READS_READ_REPLICA_H_
#define METRICS_STORAGE_PG_READS_READ_REPLICA_H_

#include <pqxx/connection>

#include <atomic>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "storage/metric_store.h"
#include "storage/pg/connection_pool.h"

namespace metrics::storage::pg {

struct ReadReplicaOptions {
  std::string primary_url;  // "" for the PG* variables
  std::string standby_url;
  int pool_size = 4;
  std::vector<PreparedStatement> statements;  // prepared on standby connections
  absl::Duration max_lag = absl::Seconds(5);
  absl::Duration check_every = absl::Seconds(1);
  // A verdict older than this (a check that hangs) sends reads to the primary.
  absl::Duration verdict_expires = absl::Seconds(5);
  // Called with a line for the log when reads move between the servers.
  std::function<void(const std::string&)> on_change;
};

// The lag arithmetic of one standby, apart from any connection.
class ReplicaLag {
 public:
  // One check: the primary's clock when its WAL position was read, whether
  // the standby had replayed that position, and the primary commit time of
  // the standby's last replayed transaction (none yet after a restart).
  // Returns the lag then.
  absl::Duration Observe(absl::Time primary_now, bool replayed_it,
                         std::optional<absl::Time> last_replayed_commit);

 private:
  absl::Time current_as_of_ = absl::InfinitePast();
};

class ReadReplica {
 public:
  // Starts the monitor; its first check runs at once. Until it has
  // answered, reads go to the primary.
  explicit ReadReplica(ReadReplicaOptions options);
  ~ReadReplica();  // stops the monitor and closes the pool

  // Whether a read may go to the standby now (counted as a standby read);
  // false for "read from the primary" (counted as a fallback, by reason).
  bool UseStandby() ABSL_LOCKS_EXCLUDED(mu_);
  // The standby's connections, for the reads UseStandby sends there.
  ConnectionPool& pool() { return pool_; }
  // A read that UseStandby sent to the standby failed in a way the primary
  // may not (`failure`: the connection, a recovery conflict, a trial the
  // standby does not have yet); the caller reads from the primary instead.
  // A lost connection also sends reads to the primary until the next good
  // check.
  void ReadFailed(const absl::Status& failure) ABSL_LOCKS_EXCLUDED(mu_);
  // Whether `failure` of a standby read is one to retry on the primary.
  static bool WorthRetryingOnPrimary(const absl::Status& failure);

  ReadRoutingStatistics Statistics() const ABSL_LOCKS_EXCLUDED(mu_);

  void Shutdown() ABSL_LOCKS_EXCLUDED(mu_);  // idempotent

 private:
  enum class Verdict { kUse, kUnreachable, kLagging, kNotStandby };
  void Monitor() ABSL_LOCKS_EXCLUDED(mu_);
  // One check: the verdict, and a line saying why.
  Verdict Check(std::string* why);
  void Decide(Verdict verdict, std::string why) ABSL_LOCKS_EXCLUDED(mu_);

  const ReadReplicaOptions options_;
  ConnectionPool pool_;
  ReplicaLag lag_;  // the monitor's
  // The monitor's own connections, with bounded waits.
  std::unique_ptr<pqxx::connection> primary_check_;
  std::unique_ptr<pqxx::connection> standby_check_;

  mutable absl::Mutex mu_;
  Verdict verdict_ ABSL_GUARDED_BY(mu_) = Verdict::kUnreachable;
  absl::Time decided_at_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  std::optional<absl::Duration> lag_seen_ ABSL_GUARDED_BY(mu_);
  // The verdict on_change last told (a failed read changes verdict_ alone).
  std::optional<Verdict> reported_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;

  std::atomic<int64_t> standby_reads_{0};
  std::atomic<int64_t> unreachable_{0};
  std::atomic<int64_t> lagging_{0};
  std::atomic<int64_t> not_standby_{0};
  std::atomic<int64_t> retried_{0};
  std::thread monitor_;
};

}  // namespace metrics::storage::pg

#endif  // METRICS_STORAGE_PG_READS_READ_REPLICA_H_
