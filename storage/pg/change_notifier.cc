#include "storage/pg/change_notifier.h"

#include <pqxx/connection>
#include <pqxx/notification>

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
    int32_t trial = 0;
    if (absl::SimpleAtoi(payload, &trial)) notifier_->Dispatch(trial);
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
    : database_url_(std::move(database_url)), thread_([this] { Loop(); }) {}

ChangeNotifier::~ChangeNotifier() { Shutdown(); }

std::unique_ptr<ChangeSubscription> ChangeNotifier::Subscribe(
    int32_t trial_id, std::function<void()> on_change) {
  absl::MutexLock lock(&mu_);
  const int64_t id = next_id_++;
  subscribers_[trial_id][id] = std::move(on_change);
  return std::make_unique<Handle>(this, trial_id, id);
}

void ChangeNotifier::Unsubscribe(int32_t trial_id, int64_t id) {
  absl::MutexLock lock(&mu_);
  auto it = subscribers_.find(trial_id);
  if (it == subscribers_.end()) return;
  it->second.erase(id);
  if (it->second.empty()) subscribers_.erase(it);
}

void ChangeNotifier::Dispatch(int32_t trial_id) {
  // Under the lock, so a subscription being dropped waits for its callback.
  absl::MutexLock lock(&mu_);
  auto it = subscribers_.find(trial_id);
  if (it == subscribers_.end()) return;
  for (auto& [id, callback] : it->second) callback();
}

void ChangeNotifier::DispatchAll() {
  absl::MutexLock lock(&mu_);
  for (auto& [trial, callbacks] : subscribers_) {
    for (auto& [id, callback] : callbacks) callback();
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
  if (thread_.joinable()) thread_.join();
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
      // Wakes at least twice a second to notice Shutdown.
      conn->await_notification(0, 500000);
      return absl::OkStatus();
    });
    if (!status.ok()) {
      receivers.clear();
      conn.reset();
      absl::SleepFor(absl::Milliseconds(500));
    }
  }
  receivers.clear();
}

}  // namespace metrics::storage::pg
