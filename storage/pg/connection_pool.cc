#include "storage/pg/connection_pool.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "storage/pg/connection.h"

namespace metrics::storage::pg {

ConnectionPool::ConnectionPool(ConnectionPoolOptions options)
    : options_(std::move(options)) {}

ConnectionPool::~ConnectionPool() { Shutdown(); }

ConnectionPool::Lease::Lease(Lease&& other) noexcept
    : pool_(other.pool_), conn_(std::move(other.conn_)) {}

ConnectionPool::Lease::~Lease() {
  if (conn_ != nullptr) pool_->Release(std::move(conn_));
}

bool ConnectionPool::CanAcquire() const {
  return shut_down_ || !idle_.empty() || open_ < options_.size;
}

absl::StatusOr<ConnectionPool::Lease> ConnectionPool::Acquire(
    absl::Time deadline) {
  {
    absl::MutexLock lock(&mu_);
    if (!mu_.AwaitWithDeadline(absl::Condition(this, &ConnectionPool::CanAcquire),
                               deadline)) {
      return absl::DeadlineExceededError(absl::StrCat(
          "all ", options_.size, " database connections are busy"));
    }
    if (shut_down_) return absl::UnavailableError("the store is shut down");
    if (!idle_.empty()) {
      std::unique_ptr<pqxx::connection> conn = std::move(idle_.back());
      idle_.pop_back();
      return Lease(this, std::move(conn));
    }
    ++open_;  // reserve a slot; connect outside the lock
  }
  absl::StatusOr<std::unique_ptr<pqxx::connection>> conn =
      Connect(options_.database_url, options_.application_name,
              options_.statements);
  if (!conn.ok()) {
    absl::MutexLock lock(&mu_);
    --open_;
    return conn.status();
  }
  return Lease(this, *std::move(conn));
}

void ConnectionPool::Release(std::unique_ptr<pqxx::connection> conn) {
  {
    absl::MutexLock lock(&mu_);
    if (conn->is_open() && !shut_down_) {
      idle_.push_back(std::move(conn));
      return;
    }
    --open_;
  }
  conn.reset();  // closing is a network round trip: not under the lock
}

void ConnectionPool::Shutdown() {
  std::vector<std::unique_ptr<pqxx::connection>> closing;
  {
    absl::MutexLock lock(&mu_);
    shut_down_ = true;
    open_ -= static_cast<int>(idle_.size());
    closing.swap(idle_);
  }
}

}  // namespace metrics::storage::pg
