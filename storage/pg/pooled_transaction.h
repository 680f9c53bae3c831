// A transaction on a pooled connection, the way every store call runs one:
// the pool's lease honours the deadline, the statement timeout is set from
// what is left of it, libpqxx's exceptions become Status (GuardPg), and the
// transaction commits only when the body returns OK. Reads run in
// pqxx::read_transaction, so PostgreSQL refuses any write they attempt
// (ReadSnapshot: the same, on one snapshot).
// When the connection breaks before the commit is sent, nothing was
// committed, so the whole transaction runs once more on a fresh connection
// (a commit in doubt is UNKNOWN and never run again). The body must
// therefore touch nothing but the transaction.
//
// Usage:
//   return Read<Trial>(pool_, "reading trial 7", deadline,
//                      [&](pqxx::transaction_base& tx) -> absl::StatusOr<Trial>
//                      {...});
//
// Thread-safety: as the pool (thread-safe); the body runs on the caller's
// thread.
#ifndef METRICS_STORAGE_PG_POOLED_TRANSACTION_H_
#define METRICS_STORAGE_PG_POOLED_TRANSACTION_H_

#include <algorithm>
#include <pqxx/transaction>
#include <utility>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/status_macros.h"
#include "storage/pg/connection_pool.h"
#include "storage/pg/pg_errors.h"

namespace metrics::storage::pg {

// Runs `body(tx)` in a transaction of type Tx (Read and Write below).
template <typename T, typename Tx, typename Body>
absl::StatusOr<T> InTransaction(ConnectionPool& pool,
                                absl::string_view operation,
                                absl::Time deadline, Body body) {
  const absl::Duration left = deadline - absl::Now();
  if (left <= absl::ZeroDuration()) {
    return absl::DeadlineExceededError(
        absl::StrCat(operation, ": deadline passed before it started"));
  }
  for (int attempt = 1;; ++attempt) {
    ASSIGN_OR_RETURN(ConnectionPool::Lease lease, pool.Acquire(deadline));
    absl::StatusOr<T> result = GuardPg(operation, [&]() -> absl::StatusOr<T> {
      Tx tx(lease.connection());
      tx.exec(absl::StrCat("SET LOCAL statement_timeout = ",
                           std::max<int64_t>(1, absl::ToInt64Milliseconds(
                                                    deadline - absl::Now()))));
      absl::StatusOr<T> done = body(tx);
      if (done.ok()) tx.commit();
      return done;
    });
    if (result.ok() || attempt == 2 ||
        result.status().code() != absl::StatusCode::kUnavailable ||
        lease.connection().is_open()) {
      return result;
    }
  }
}

template <typename T, typename Body>
absl::StatusOr<T> Write(ConnectionPool& pool, absl::string_view operation,
                        absl::Time deadline, Body body) {
  return InTransaction<T, pqxx::work>(pool, operation, deadline,
                                      std::move(body));
}

template <typename T, typename Body>
absl::StatusOr<T> Read(ConnectionPool& pool, absl::string_view operation,
                       absl::Time deadline, Body body) {
  return InTransaction<T, pqxx::read_transaction>(pool, operation, deadline,
                                                  std::move(body));
}

// A read on one snapshot (REPEATABLE READ), for reads whose statements must
// agree (a seal moves samples from raw rows to stored buckets). The level is
// set by the statement that begins the transaction, not by one more.
template <typename T, typename Body>
absl::StatusOr<T> ReadSnapshot(ConnectionPool& pool, absl::string_view operation,
                               absl::Time deadline, Body body) {
  return InTransaction<T, pqxx::transaction<pqxx::repeatable_read, pqxx::read_only>>(
      pool, operation, deadline, std::move(body));
}

}  // namespace metrics::storage::pg

#endif  // METRICS_STORAGE_PG_POOLED_TRANSACTION_H_
