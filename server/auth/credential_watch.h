// Ends open streams whose credential stops authenticating. A stream is
// checked when it opens; a long-lived one (an agent's ingest stream, a
// chart's follow) registers its credential here, and every `tick` each
// distinct credential of the open streams is authenticated again through
// the Authenticator (its cache answers until `recheck` passed, so the store
// sees one look-up per credential and recheck). A stream whose credential
// is refused (revoked, expired) is told once, with UNAUTHENTICATED, and
// ends itself: within recheck plus a tick of the revocation, on every
// server. A store that cannot answer ends nothing.
//
// Thread-safety: thread-safe. `refused` callbacks run on the watch's
// thread, one at a time; a Watched handle's destructor waits for its
// callback to return, unless it runs inside that callback.
#ifndef METRICS_SERVER_AUTH_CREDENTIAL_WATCH_H_
#define METRICS_SERVER_AUTH_CREDENTIAL_WATCH_H_

#include <functional>
#include <memory>
#include <set>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "server/auth/authenticator.h"

namespace metrics::server {

class CredentialWatch {
 public:
  // A registration; unregisters on destruction.
  class Watched {
   public:
    virtual ~Watched() = default;
  };

  // `authenticator` must outlive the watch. Starts its thread.
  CredentialWatch(Authenticator* authenticator, absl::Duration tick);
  // Stops the thread; every Watched must be gone by now.
  ~CredentialWatch();

  CredentialWatch(const CredentialWatch&) = delete;
  CredentialWatch& operator=(const CredentialWatch&) = delete;

  // Watches `credential` (the presented header value) for a stream;
  // `refused` is called once, from the watch's thread, when it stops
  // authenticating.
  std::unique_ptr<Watched> Watch(std::string credential,
                                 std::function<void(absl::Status)> refused)
      ABSL_LOCKS_EXCLUDED(mu_);

  // Streams watched now (for tests).
  size_t watched() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  struct Entry {
    std::string credential;
    std::function<void(absl::Status)> refused;
    bool told = false;
  };
  class Registration;

  void Run() ABSL_LOCKS_EXCLUDED(mu_);
  void Check() ABSL_LOCKS_EXCLUDED(mu_);
  void Remove(Entry* entry) ABSL_LOCKS_EXCLUDED(mu_);
  bool Idle() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return calling_ == nullptr; }

  Authenticator* const authenticator_;
  const absl::Duration tick_;
  mutable absl::Mutex mu_;
  std::set<std::shared_ptr<Entry>> entries_ ABSL_GUARDED_BY(mu_);
  // The entry whose callback runs now, and on which thread.
  const Entry* calling_ ABSL_GUARDED_BY(mu_) = nullptr;
  std::thread::id calling_thread_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace metrics::server

#endif  // METRICS_SERVER_AUTH_CREDENTIAL_WATCH_H_
