// A bounded pool of PostgreSQL connections for blocking calls (trials,
// positions, queries). A Lease gives one caller one connection; the pool
// opens connections lazily up to its size, hands them out in turn, and drops
// any that broke, or that the server closed while they sat idle (a restart,
// a terminated backend), so the next caller gets a fresh one.
//
// Usage:
//   ASSIGN_OR_RETURN(ConnectionPool::Lease lease, pool.Acquire(deadline));
//   pqxx::work tx(lease.connection());
//
// Thread-safety: thread-safe. A Lease (and its connection) belongs to one
// thread at a time.
#ifndef METRICS_STORAGE_PG_CONNECTION_POOL_H_
#define METRICS_STORAGE_PG_CONNECTION_POOL_H_

#include <memory>
#include <string>
#include <vector>

#include <pqxx/connection>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "storage/pg/connection.h"
#include "storage/pg/prepared.h"

namespace metrics::storage::pg {

struct ConnectionPoolOptions {
  std::string database_url;  // "" for the PG* variables
  std::string application_name = "metricsd";
  int size = 4;  // connections at most
  // Prepared on every connection the pool opens, after these settings.
  std::vector<PreparedStatement> statements;
  std::vector<SessionSetting> settings;
};

class ConnectionPool {
 public:
  explicit ConnectionPool(ConnectionPoolOptions options);
  ~ConnectionPool();

  class Lease {
   public:
    Lease(Lease&& other) noexcept;
    Lease& operator=(Lease&&) = delete;
    ~Lease();
    pqxx::connection& connection() { return *conn_; }

   private:
    friend class ConnectionPool;
    Lease(ConnectionPool* pool, std::unique_ptr<pqxx::connection> conn)
        : pool_(pool), conn_(std::move(conn)) {}
    ConnectionPool* pool_;
    std::unique_ptr<pqxx::connection> conn_;
  };

  // Waits for a free connection until `deadline`: DEADLINE_EXCEEDED
  // ("all N database connections are busy") then; UNAVAILABLE or
  // PERMISSION_DENIED if a new connection cannot be opened; UNAVAILABLE
  // after Shutdown.
  absl::StatusOr<Lease> Acquire(absl::Time deadline) ABSL_LOCKS_EXCLUDED(mu_);

  // Closes idle connections and refuses new leases; leases out return their
  // connection to be closed. Idempotent.
  void Shutdown() ABSL_LOCKS_EXCLUDED(mu_);

  // Closes the idle connections, so the next leases connect anew: libpq
  // then picks the server again among a multi-host URL's (a standby that
  // was promoted is a primary now; another may be the standby).
  void CloseIdle() ABSL_LOCKS_EXCLUDED(mu_);

 private:
  void Release(std::unique_ptr<pqxx::connection> conn) ABSL_LOCKS_EXCLUDED(mu_);
  bool CanAcquire() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const ConnectionPoolOptions options_;
  absl::Mutex mu_;
  std::vector<std::unique_ptr<pqxx::connection>> idle_ ABSL_GUARDED_BY(mu_);
  int open_ ABSL_GUARDED_BY(mu_) = 0;  // idle + leased
  bool shut_down_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace metrics::storage::pg

#endif  // METRICS_STORAGE_PG_CONNECTION_POOL_H_
