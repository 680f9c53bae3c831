#include "server/readiness.h"

#include <utility>

#include "absl/time/clock.h"

namespace metrics::server {

ReadinessProbe::ReadinessProbe(
    storage::MetricStore* store, ReadinessOptions options,
    std::function<void(bool, const std::string&)> on_change)
    : store_(store), options_(options), on_change_(std::move(on_change)) {
  last_good_ = absl::Now();
  checker_ = std::thread([this] { Check(); });
  watcher_ = std::thread([this] {
    absl::MutexLock lock(&mu_);
    while (!mu_.AwaitWithTimeout(absl::Condition(&stopping_),
                                 options_.interval)) {
      mu_.Unlock();
      Report();
      mu_.Lock();
    }
  });
}

ReadinessProbe::~ReadinessProbe() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  watcher_.join();
  checker_.join();  // at most a check's bounded wait
}

bool ReadinessProbe::Ready(std::string* reason, absl::StatusCode* code) const {
  absl::MutexLock lock(&mu_);
  return ReadyLocked(reason, code);
}

bool ReadinessProbe::ReadyLocked(std::string* reason, absl::StatusCode* code) const {
  if (!last_failure_.empty()) {
    if (reason != nullptr) *reason = last_failure_;
    if (code != nullptr) *code = last_failure_code_;
    return false;
  }
  if (absl::Now() - last_good_ > options_.stale_after) {
    if (reason != nullptr) *reason = "the database does not answer";
    if (code != nullptr) *code = absl::StatusCode::kUnavailable;
    return false;
  }
  return true;
}

void ReadinessProbe::Check() {
  absl::MutexLock lock(&mu_);
  while (!stopping_) {
    mu_.Unlock();
    const absl::Status checked = store_->CheckDatabase();
    mu_.Lock();
    if (checked.ok()) {
      last_good_ = absl::Now();
      last_failure_.clear();
      last_failure_code_ = absl::StatusCode::kOk;
    } else {
      last_failure_ = std::string(checked.message());
      last_failure_code_ = checked.code();
    }
    mu_.Unlock();
    Report();
    mu_.Lock();
    mu_.AwaitWithTimeout(absl::Condition(&stopping_), options_.interval);
  }
}

void ReadinessProbe::Report() {
  absl::MutexLock report(&report_mu_);
  std::string reason;
  bool ready;
  {
    absl::MutexLock lock(&mu_);
    ready = ReadyLocked(&reason, nullptr);
  }
  if (ready == reported_) return;
  reported_ = ready;
  on_change_(ready, reason);
}

}  // namespace metrics::server
