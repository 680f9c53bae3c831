#include "storage/pg/connection_pool.h"

#include <sys/socket.h>

#include <cerrno>
#include <utility>

#include "absl/strings/str_cat.h"
#include "storage/pg/connection.h"

namespace metrics::storage::pg {

namespace {

// An idle connection has nothing to read. One whose server closed it (a
// restart, a terminated backend) has the server's last message or the end
// of the stream waiting: it would fail its next statement.
bool LooksAlive(pqxx::connection& conn) {
  const int fd = conn.is_open() ? conn.sock() : -1;
  if (fd < 0) return false;
  char byte;
  const ssize_t n = ::recv(fd, &byte, 1, MSG_PEEK | MSG_DONTWAIT);
  return n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);
}

}  // namespace

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
  // Dead idle connections, closed after the lock is released.
  std::vector<std::unique_ptr<pqxx::connection>> dead;
  {
    absl::MutexLock lock(&mu_);
    if (!mu_.AwaitWithDeadline(absl::Condition(this, &ConnectionPool::CanAcquire),
                               deadline)) {
      return absl::DeadlineExceededError(absl::StrCat(
          "all ", options_.size, " database connections are busy"));
    }
    if (shut_down_) return absl::UnavailableError("the store is shut down");
    // After the database restarted, every idle connection is dead: they are
    // all skipped here rather than failing one caller each.
    while (!idle_.empty()) {
      std::unique_ptr<pqxx::connection> conn = std::move(idle_.back());
      idle_.pop_back();
      if (LooksAlive(*conn)) return Lease(this, std::move(conn));
      dead.push_back(std::move(conn));
      --open_;
    }
    ++open_;  // reserve a slot; connect outside the lock
  }
  dead.clear();
  absl::StatusOr<std::unique_ptr<pqxx::connection>> conn =
      Connect(options_.database_url, options_.application_name,
              options_.statements, options_.settings);
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

void ConnectionPool::CloseIdle() {
  std::vector<std::unique_ptr<pqxx::connection>> closing;
  {
    absl::MutexLock lock(&mu_);
    open_ -= static_cast<int>(idle_.size());
    closing.swap(idle_);
  }
  // closed here, outside the lock: closing is a network round trip
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
