// Tells subscribers when a trial's data or state changed, from PostgreSQL
// notifications: the ingest writer sends NOTIFY metrics_ingest
// '<trial> <agent>' for each agent with data in a commit, SetTrialState
// NOTIFY metrics_trials '<trial>'. A subscriber to some agents of a trial
// hears only their commits (and the trial's state changes); a payload
// without an agent reaches every subscriber of the trial. One thread
// holds one LISTEN connection for the whole process, so followers on any
// number of metricsd instances learn of every commit. After losing that
// connection it reconnects and calls every subscriber once, since
// notifications may have been missed meanwhile.
//
// Thread-safety: thread-safe. Callbacks run on the notifier thread, under
// its lock: they must be quick and must not subscribe or unsubscribe.
#ifndef METRICS_STORAGE_PG_CHANGE_NOTIFIER_H_
#define METRICS_STORAGE_PG_CHANGE_NOTIFIER_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/time/time.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "storage/metric_store.h"

namespace metrics::storage::pg {

inline constexpr char kIngestChannel[] = "metrics_ingest";
inline constexpr char kTrialsChannel[] = "metrics_trials";

class ChangeNotifier {
 public:
  explicit ChangeNotifier(std::string database_url);
  ~ChangeNotifier();

  // `agent_ids`: whose commits to hear; empty: every agent's.
  std::unique_ptr<ChangeSubscription> Subscribe(
      int32_t trial_id, std::vector<std::string> agent_ids,
      std::function<void()> on_change) ABSL_LOCKS_EXCLUDED(mu_);

  // Stops the thread and closes the connection. Idempotent.
  void Shutdown() ABSL_LOCKS_EXCLUDED(mu_);

  // Internal: called by the listening thread with a notification's
  // payload.
  void Dispatch(absl::string_view payload) ABSL_LOCKS_EXCLUDED(mu_);
  void DispatchAll() ABSL_LOCKS_EXCLUDED(mu_);

 private:
  class Handle;
  struct Subscriber {
    std::vector<std::string> agent_ids;  // sorted; empty: every agent
    std::function<void()> on_change;
  };
  void Unsubscribe(int32_t trial_id, int64_t id) ABSL_LOCKS_EXCLUDED(mu_);
  void Loop();
  bool Stopping() ABSL_LOCKS_EXCLUDED(mu_);
  // Waits until `sock` (if not -1) is readable, Shutdown is called, or
  // `timeout` passes.
  void Wait(int sock, absl::Duration timeout);

  const std::string database_url_;
  // An eventfd that Shutdown writes: the thread wakes at once rather than
  // at its next timeout (each store's shutdown, each test's, waited for
  // it).
  const int wake_fd_;
  absl::Mutex mu_;
  std::map<int32_t, std::map<int64_t, Subscriber>> subscribers_
      ABSL_GUARDED_BY(mu_);
  int64_t next_id_ ABSL_GUARDED_BY(mu_) = 0;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace metrics::storage::pg

#endif  // METRICS_STORAGE_PG_CHANGE_NOTIFIER_H_
