#include "storage/pg/jobs/seal_trigger.h"

#include <algorithm>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/retry_after.h"

namespace metrics::storage::pg {

void SealTrigger::Stored(int32_t trial, absl::string_view agent, int64_t reports) {
  absl::MutexLock lock(&mu_);
  if (waiting_.size() >= max_agents_) {
    absl::erase_if(waiting_, [this](const auto& entry) {
      return !entry.second.due && entry.second.reports < seal_after_ / 2;
    });
  }
  Waiting& w = waiting_[Agent(trial, std::string(agent))];
  if (w.reports <= 0) w.since = absl::Now();
  w.reports += reports;
  if (!w.due && w.reports >= seal_after_) {
    w.due = true;
    due_.emplace_back(trial, std::string(agent));
  }
}

void SealTrigger::Sealed(int32_t trial, absl::string_view agent, int64_t rows) {
  absl::MutexLock lock(&mu_);
  auto it = waiting_.find(Agent(trial, std::string(agent)));
  if (it == waiting_.end()) return;
  // Never below zero: the rows taken may include another server's.
  it->second.reports = std::max<int64_t>(0, it->second.reports - rows);
  it->second.since = absl::Now();
  if (it->second.reports <= 0 && !it->second.due) waiting_.erase(it);
}

absl::Status SealTrigger::Admit(int32_t trial, absl::string_view agent) const {
  int64_t waiting = 0;
  absl::Duration lag;
  {
    absl::MutexLock lock(&mu_);
    auto it = waiting_.find(Agent(trial, std::string(agent)));
    if (it == waiting_.end() || it->second.reports < 4 * seal_after_) return absl::OkStatus();
    lag = absl::Now() - it->second.since;
    if (lag < max_lag_) return absl::OkStatus();
    waiting = it->second.reports;
  }
  // A short wait: the sealer takes an agent's rows a few thousand at a
  // time, in tens of milliseconds.
  return common::WithRetryAfter(
      absl::ResourceExhaustedError(absl::StrCat(
          "agent ", agent, " of trial ", trial, " has ", waiting,
          " reports waiting for their seal (at most ", 4 * seal_after_,
          " may wait), none sealed for ", absl::FormatDuration(absl::Trunc(lag, absl::Milliseconds(1))),
          "; retry later")),
      kRetryAfter);
}

std::optional<SealTrigger::Due> SealTrigger::NextDue(absl::Time deadline) {
  absl::MutexLock lock(&mu_);
  mu_.AwaitWithDeadline(absl::Condition(this, &SealTrigger::DueOrStopped), deadline);
  if (stopped_ || due_.empty()) return std::nullopt;
  Due due{std::move(due_.front())};
  due_.pop_front();
  if (auto it = waiting_.find(due.agent); it != waiting_.end()) {
    due.waiting = it->second.reports;
    // Due again once more rows come, should this seal fail.
    it->second.due = false;
  }
  return due;
}

void SealTrigger::Stop() {
  absl::MutexLock lock(&mu_);
  stopped_ = true;
}

size_t SealTrigger::agents() const {
  absl::MutexLock lock(&mu_);
  return waiting_.size();
}

}  // namespace metrics::storage::pg
