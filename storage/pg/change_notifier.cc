#include "storage/pg/change_notifier.h"

#include <pqxx/connection>
#include <pqxx/notification>

#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/time/clock.h"
#include "storage/pg/connection.h"
#include "storage/pg/pg_errors.h"

namespace metrics::storage::pg {

namespace {

class Receiver : public pqxx::notification_receiver {
 public:
  Receiver(pqxx::connection_base& conn, const std::string& channel,
           ChangeNotifier* notifier)
      : pqxx::notification_receiver(conn, channel), notifier_(notifier) {}

  void operator()(const std::string& payload, int) override {
    notifier_->Dispatch(payload);
  }

 private:
  ChangeNotifier* const notifier_;
};

}  // namespace

class ChangeNotifier::Handle : public ChangeSubscription {
 public:
  Handle(ChangeNotifier* notifier, int32_t trial, int64_t id)
      : notifier_(notifier), trial_(trial), id_(id) {}
  ~Handle() override { notifier_->Unsubscribe(trial_, id_); }

 private:
  ChangeNotifier* const notifier_;
  const int32_t trial_;
  const int64_t id_;
};

ChangeNotifier::ChangeNotifier(std::string database_url)
    : database_url_(std::move(database_url)),
      wake_fd_(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)),
      thread_([this] { Loop(); }) {}

ChangeNotifier::~ChangeNotifier() {
  Shutdown();
  if (wake_fd_ >= 0) close(wake_fd_);
}

std::unique_ptr<ChangeSubscription> ChangeNotifier::Subscribe(
    int32_t trial_id, std::vector<std::string> agent_ids,
    std::function<void()> on_change) {
  std::sort(agent_ids.begin(), agent_ids.end());
  absl::MutexLock lock(&mu_);
  const int64_t id = next_id_++;
  subscribers_[trial_id][id] = {std::move(agent_ids), std::move(on_change)};
  return std::make_unique<Handle>(this, trial_id, id);
}

void ChangeNotifier::Unsubscribe(int32_t trial_id, int64_t id) {
  absl::MutexLock lock(&mu_);
  auto it = subscribers_.find(trial_id);
  if (it == subscribers_.end()) return;
  it->second.erase(id);
  if (it->second.empty()) subscribers_.erase(it);
}

void ChangeNotifier::Dispatch(absl::string_view payload) {
  // '<trial>' or '<trial> <agent>' (an agent id may hold spaces, not at its
  // ends).
  const size_t space = payload.find(' ');
  int32_t trial_id = 0;
  if (!absl::SimpleAtoi(payload.substr(0, space), &trial_id)) return;
  const bool any_agent = space == absl::string_view::npos;
  const absl::string_view agent =
      any_agent ? absl::string_view() : payload.substr(space + 1);
  // Under the lock, so a subscription being dropped waits for its callback.
  absl::MutexLock lock(&mu_);
  auto it = subscribers_.find(trial_id);
  if (it == subscribers_.end()) return;
  for (auto& [id, subscriber] : it->second) {
    if (any_agent || subscriber.agent_ids.empty() ||
        std::binary_search(subscriber.agent_ids.begin(),
                           subscriber.agent_ids.end(), agent)) {
      subscriber.on_change();
    }
  }
}

void ChangeNotifier::DispatchAll() {
  absl::MutexLock lock(&mu_);
  for (auto& [trial, subscribers] : subscribers_) {
    for (auto& [id, subscriber] : subscribers) subscriber.on_change();
  }
}

bool ChangeNotifier::Stopping() {
  absl::MutexLock lock(&mu_);
  return stopping_;
}

void ChangeNotifier::Shutdown() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  if (wake_fd_ >= 0) {
    const uint64_t one = 1;
    (void)!write(wake_fd_, &one, sizeof one);
  }
  if (thread_.joinable()) thread_.join();
}

void ChangeNotifier::Wait(int sock, absl::Duration timeout) {
  pollfd fds[2] = {{wake_fd_, POLLIN, 0}, {sock, POLLIN, 0}};
  // Without an eventfd (none left), the timeout alone notices Shutdown.
  poll(fds, sock >= 0 ? 2 : 1, static_cast<int>(absl::ToInt64Milliseconds(timeout)));
}

void ChangeNotifier::Loop() {
  std::unique_ptr<pqxx::connection> conn;
  std::vector<std::unique_ptr<Receiver>> receivers;
  while (!Stopping()) {
    absl::Status status = GuardPg("listening for changes", [&] {
      if (conn == nullptr) {
        absl::StatusOr<std::unique_ptr<pqxx::connection>> opened =
            Connect(database_url_, "metricsd-notifier");
        if (!opened.ok()) return opened.status();
        conn = *std::move(opened);
        for (const char* channel : {kIngestChannel, kTrialsChannel}) {
          receivers.push_back(std::make_unique<Receiver>(*conn, channel, this));
        }
        // Anything committed while not listening was missed.
        DispatchAll();
      }
      // Notifications already read are handled before waiting for more.
      if (conn->get_notifs() == 0) {
        Wait(conn->sock(), absl::Milliseconds(500));
        conn->get_notifs();
      }
      return absl::OkStatus();
    });
    if (!status.ok()) {
      receivers.clear();
      conn.reset();
      Wait(-1, absl::Milliseconds(500));
    }
  }
  receivers.clear();
}

}  // namespace metrics::storage::pg
