#include "server/auth/credential_watch.h"

#include <map>
#include <utility>
#include <vector>

#include "absl/time/clock.h"

namespace metrics::server {

namespace {

// A look-up of one credential may take this long before the watch moves on.
constexpr absl::Duration kLookupTimeout = absl::Seconds(5);

}  // namespace

class CredentialWatch::Registration : public Watched {
 public:
  Registration(CredentialWatch* watch, std::shared_ptr<Entry> entry)
      : watch_(watch), entry_(std::move(entry)) {}
  ~Registration() override { watch_->Remove(entry_.get()); }

 private:
  CredentialWatch* const watch_;
  const std::shared_ptr<Entry> entry_;
};

CredentialWatch::CredentialWatch(Authenticator* authenticator,
                                 absl::Duration tick)
    : authenticator_(authenticator), tick_(tick), thread_([this] { Run(); }) {}

CredentialWatch::~CredentialWatch() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  thread_.join();
}

std::unique_ptr<CredentialWatch::Watched> CredentialWatch::Watch(
    std::string credential, std::function<void(absl::Status)> refused) {
  auto entry = std::make_shared<Entry>();
  entry->credential = std::move(credential);
  entry->refused = std::move(refused);
  {
    absl::MutexLock lock(&mu_);
    entries_.insert(entry);
  }
  return std::make_unique<Registration>(this, std::move(entry));
}

void CredentialWatch::Remove(Entry* entry) {
  absl::MutexLock lock(&mu_);
  for (auto it = entries_.begin(); it != entries_.end(); ++it) {
    if (it->get() == entry) {
      entries_.erase(it);
      break;
    }
  }
  // Its callback may be running: wait, unless this is that callback's thread
  // (a stream that ends inside its callback lets go of its registration).
  if (calling_ == entry && calling_thread_ != std::this_thread::get_id()) {
    mu_.Await(absl::Condition(this, &CredentialWatch::Idle));
  }
}

size_t CredentialWatch::watched() const {
  absl::MutexLock lock(&mu_);
  return entries_.size();
}

void CredentialWatch::Run() {
  while (true) {
    {
      absl::MutexLock lock(&mu_);
      mu_.AwaitWithTimeout(absl::Condition(&stopping_), tick_);
      if (stopping_) return;
    }
    Check();
  }
}

void CredentialWatch::Check() {
  std::map<std::string, std::vector<std::shared_ptr<Entry>>> by_credential;
  {
    absl::MutexLock lock(&mu_);
    for (const std::shared_ptr<Entry>& e : entries_) {
      if (!e->told) by_credential[e->credential].push_back(e);
    }
  }
  for (auto& [credential, entries] : by_credential) {
    absl::StatusOr<Principal> principal = authenticator_->Authenticate(
        credential, /*peer=*/"", absl::Now() + kLookupTimeout);
    if (principal.ok() ||
        principal.status().code() != absl::StatusCode::kUnauthenticated) {
      continue;
    }
    for (const std::shared_ptr<Entry>& e : entries) {
      {
        absl::MutexLock lock(&mu_);
        if (e->told || entries_.count(e) == 0) continue;  // gone meanwhile
        e->told = true;
        calling_ = e.get();
        calling_thread_ = std::this_thread::get_id();
      }
      e->refused(principal.status());
      absl::MutexLock lock(&mu_);
      calling_ = nullptr;
    }
  }
}

}  // namespace metrics::server
