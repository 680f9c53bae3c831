#include "storage/pg/ingest/ingest_writer.h"

#include <algorithm>
#include <deque>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "common/logging.h"
#include "common/status_macros.h"
#include "storage/pg/connection.h"
#include "storage/pg/pg_errors.h"

namespace metrics::storage::pg {

namespace {

// Worth retrying the same transaction: the connection or server went away,
// the commit's fate is unknown, or it lost a lock race.
bool Retryable(absl::StatusCode code) {
  switch (code) {
    case absl::StatusCode::kUnavailable:
    case absl::StatusCode::kAborted:
    case absl::StatusCode::kUnknown:
    case absl::StatusCode::kAlreadyExists:
    case absl::StatusCode::kDeadlineExceeded:
    case absl::StatusCode::kResourceExhausted:
      return true;
    default:
      return false;
  }
}

std::vector<BatchOutcome> AllFailed(size_t n, const absl::Status& status,
                                    const std::vector<PendingBatch*>& group) {
  std::vector<BatchOutcome> outcomes(n);
  for (size_t i = 0; i < n; ++i) {
    outcomes[i].kind = BatchOutcome::Kind::kFailed;
    outcomes[i].status = status;
    outcomes[i].sequence = group[i]->batch.sequence;
  }
  return outcomes;
}

}  // namespace

class IngestWriter::Lane {
 public:
  Lane(IngestWriter* writer, int index)
      : writer_(writer),
        index_(index),
        committer_(writer->options_.max_series_per_trial, writer->options_.max_cached_series),
        thread_([this] { Loop(); }) {}

  ~Lane() { Stop(absl::Now()); }

  // False (and `batch` untouched) once the lane is stopping.
  bool Push(std::unique_ptr<PendingBatch>& batch) ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    if (stopping_) return false;
    queued_values_ += batch->batch.ValueCount();
    ++pushed_;
    queue_.push_back(std::move(batch));
    return true;
  }

  void Stop(absl::Time deadline) ABSL_LOCKS_EXCLUDED(mu_) {
    {
      absl::MutexLock lock(&mu_);
      if (!stopping_) {
        stopping_ = true;
        stop_deadline_ = deadline;
      }
    }
    if (thread_.joinable()) thread_.join();
  }

 private:
  bool HasWorkOrStopping() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return !queue_.empty() || stopping_;
  }

  // The queue holds a whole group (or more), or the lane is stopping.
  bool GroupFullOrStopping() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    const IngestWriterOptions& o = writer_->options_;
    return stopping_ || queue_.size() >= o.max_group_batches ||
           queued_values_ >= o.max_group_values;
  }

  // Waits for a busy lane's group to fill (IngestWriterOptions::
  // group_linger). The wait wakes once a `linger_idle` (or
  // `linger_idle_small`), not at each arrival: waking the lane's thread per
  // batch would cost what the larger group saves.
  void LingerLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    const IngestWriterOptions& o = writer_->options_;
    if (o.group_linger <= absl::ZeroDuration() ||
        queue_.size() < o.linger_after_batches) {
      return;
    }
    const absl::Time until = absl::Now() + o.group_linger;
    for (absl::Time now = absl::Now(); now < until; now = absl::Now()) {
      const uint64_t seen = pushed_;
      const absl::Duration idle = queued_values_ < o.linger_small_values
                                      ? o.linger_idle_small
                                      : o.linger_idle;
      if (mu_.AwaitWithDeadline(
              absl::Condition(this, &Lane::GroupFullOrStopping),
              std::min(until, now + idle))) {
        return;
      }
      if (pushed_ == seen) return;  // nothing came: its senders wait for us
    }
  }

  // Takes whole batches up to the group size; empty when stopping and done.
  std::vector<std::unique_ptr<PendingBatch>> TakeGroup(bool& past_deadline)
      ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    mu_.Await(absl::Condition(this, &Lane::HasWorkOrStopping));
    LingerLocked();
    past_deadline = stopping_ && absl::Now() >= stop_deadline_;
    std::vector<std::unique_ptr<PendingBatch>> group;
    size_t values = 0;
    while (!queue_.empty()) {
      const size_t n = queue_.front()->batch.ValueCount();
      if (!group.empty() && !past_deadline &&
          (values + n > writer_->options_.max_group_values ||
           group.size() >= writer_->options_.max_group_batches)) {
        break;
      }
      values += n;
      queued_values_ -= n;
      group.push_back(std::move(queue_.front()));
      queue_.pop_front();
    }
    return group;
  }

  absl::Time RetryLimit(absl::Time start) ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    const absl::Time limit = start + writer_->options_.retry_for;
    return stopping_ ? std::min(limit, stop_deadline_) : limit;
  }

  void Loop() {
    while (true) {
      bool past_deadline = false;
      std::vector<std::unique_ptr<PendingBatch>> group =
          TakeGroup(past_deadline);
      if (group.empty()) return;  // stopping, queue drained
      std::vector<PendingBatch*> batches;
      for (auto& p : group) {
        p->UnpackSeries();
        batches.push_back(p.get());
      }
      std::vector<BatchOutcome> outcomes =
          past_deadline
              ? AllFailed(batches.size(),
                          absl::UnavailableError(
                              "metricsd is shutting down; resend the batch"),
                          batches)
              : CommitWithRetry(batches);
      const absl::Time now = absl::Now();
      for (size_t i = 0; i < group.size(); ++i) {
        const size_t values = group[i]->batch.ValueCount();
        writer_->queued_values_ -= values;
        --writer_->queued_batches_;
        writer_->Release(group[i]->batch, index_, values);
        writer_->Count(outcomes[i], values,
                       absl::ToDoubleSeconds(now - group[i]->submitted));
        const MetricBatch& batch = group[i]->batch;
        if (outcomes[i].kind == BatchOutcome::Kind::kStored && writer_->options_.on_stored &&
            batch.metric_group == kSystemGroup) {
          writer_->options_.on_stored(batch.trial_id, batch.agent_id,
                                      static_cast<int64_t>(batch.reports.size()));
        }
        std::move(group[i]->done)(std::move(outcomes[i]));
      }
    }
  }

  absl::StatusOr<std::vector<BatchOutcome>> TryOnce(
      const std::vector<PendingBatch*>& group) {
    if (conn_ == nullptr || !conn_->is_open()) {
      absl::StatusOr<std::unique_ptr<pqxx::connection>> conn =
          Connect(writer_->options_.database_url,
                  absl::StrCat("metricsd-writer-", index_),
                  GroupCommitter::Statements(),
                  GroupCommitter::SessionSettings());
      if (!conn.ok()) return conn.status();
      conn_ = *std::move(conn);
    }
    return committer_.Commit(*conn_, group);
  }

  std::vector<BatchOutcome> CommitWithRetry(
      const std::vector<PendingBatch*>& group) {
    const absl::Time limit = RetryLimit(absl::Now());
    absl::Duration backoff = absl::Milliseconds(50);
    while (true) {
      absl::StatusOr<std::vector<BatchOutcome>> outcomes = TryOnce(group);
      if (outcomes.ok()) {
        if (stalled_) {
          common::LogInfo("ingest lane ", index_, ": committing again");
          writer_->NoteCommitting(index_);
          stalled_ = false;
        }
        return *std::move(outcomes);
      }
      const absl::Status& error = outcomes.status();
      if (!Retryable(error.code())) {
        if (group.size() == 1) return AllFailed(1, error, group);
        // Commit one by one, so the batch at fault fails alone.
        std::vector<BatchOutcome> each;
        for (PendingBatch* p : group) {
          each.push_back(CommitWithRetry({p})[0]);
        }
        return each;
      }
      if (!stalled_) {
        common::LogWarning("ingest lane ", index_, ": ", error.ToString(),
                           "; retrying");
        stalled_ = true;
      }
      writer_->NoteStalled(index_, error);
      if (absl::Now() + backoff > limit) {
        return AllFailed(group.size(),
                         absl::UnavailableError(absl::StrCat(
                             "could not commit within ",
                             absl::FormatDuration(writer_->options_.retry_for),
                             ": ", error.message(), "; resend the batch")),
                         group);
      }
      absl::SleepFor(backoff);
      backoff = std::min(backoff * 2, absl::Seconds(2));
    }
  }

  IngestWriter* const writer_;
  const int index_;
  absl::Mutex mu_;
  std::deque<std::unique_ptr<PendingBatch>> queue_ ABSL_GUARDED_BY(mu_);
  // What queue_ holds, and how many batches ever came (to see arrivals).
  size_t queued_values_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t pushed_ ABSL_GUARDED_BY(mu_) = 0;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  absl::Time stop_deadline_ ABSL_GUARDED_BY(mu_) = absl::InfiniteFuture();
  // Used only by the lane's thread.
  std::unique_ptr<pqxx::connection> conn_;
  // Refused since the last commit that went through, across groups (a group
  // that fails past the retry limit leaves the stall to the next one).
  bool stalled_ = false;
  GroupCommitter committer_;
  std::thread thread_;  // last: starts after the members above exist
};

IngestWriter::IngestWriter(IngestWriterOptions options)
    : options_(std::move(options)),
      lane_values_(static_cast<size_t>(std::max(1, options_.lanes)), 0),
      stalls_(static_cast<size_t>(std::max(1, options_.lanes))) {
  for (int i = 0; i < std::max(1, options_.lanes); ++i) {
    lanes_.push_back(std::make_unique<Lane>(this, i));
  }
}

IngestWriter::RouteKey IngestWriter::RouteOf(const MetricBatch& batch) {
  return {batch.trial_id,
          batch.stream_id.empty() ? batch.agent_id : batch.stream_id};
}

size_t IngestWriter::Assign(const MetricBatch& batch, size_t values) {
  absl::MutexLock lock(&routes_mu_);
  if (routes_.size() >= options_.max_routes) {
    absl::erase_if(routes_, [](const auto& r) { return r.second.batches == 0; });
  }
  auto [route, added] = routes_.try_emplace(RouteOf(batch), Route{0, 0});
  if (route->second.batches == 0) {
    const size_t least = static_cast<size_t>(
        std::min_element(lane_values_.begin(), lane_values_.end()) -
        lane_values_.begin());
    // An idle stream goes back to its lane, whose cache knows its series,
    // unless that lane is far busier than the least busy one.
    if (added || lane_values_[route->second.lane] >
                     2 * lane_values_[least] + kRouteSlackValues) {
      route->second.lane = least;
    }
  }
  ++route->second.batches;
  lane_values_[route->second.lane] += values;
  return route->second.lane;
}

void IngestWriter::Release(const MetricBatch& batch, size_t lane,
                           size_t values) {
  absl::MutexLock lock(&routes_mu_);
  lane_values_[lane] -= values;
  const auto route = routes_.find(RouteOf(batch));
  if (route != routes_.end()) --route->second.batches;
}

IngestWriter::~IngestWriter() { Shutdown(absl::Now()); }

absl::Status IngestWriter::Submit(std::unique_ptr<PendingBatch> batch) {
  if (!accepting_) {
    return absl::UnavailableError("metricsd is shutting down");
  }
  if (options_.admit && batch->batch.metric_group == kSystemGroup) {
    RETURN_IF_ERROR(options_.admit(batch->batch.trial_id, batch->batch.agent_id));
  }
  const size_t values = batch->batch.ValueCount();
  batch->submitted = absl::Now();
  size_t queued = queued_values_.load();
  do {
    if (queued + values > options_.max_queued_values && queued > 0) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "the ingest queue is full (", queued, " values waiting for the "
          "database); retry later"));
    }
  } while (!queued_values_.compare_exchange_weak(queued, queued + values));
  if (queued_batches_++ >= options_.pack_labels_after_batches) {
    batch->PackSeries();
  }
  const size_t lane = Assign(batch->batch, values);
  if (!lanes_[lane]->Push(batch)) {
    Release(batch->batch, lane, values);
    queued_values_ -= values;
    --queued_batches_;
    return absl::UnavailableError("metricsd is shutting down");
  }
  return absl::OkStatus();
}

void IngestWriter::Count(const BatchOutcome& outcome, size_t values,
                         double seconds) {
  switch (outcome.kind) {
    case BatchOutcome::Kind::kStored:
      ++stored_batches_;
      stored_values_ += static_cast<int64_t>(values);
      break;
    case BatchOutcome::Kind::kDuplicate:
      ++duplicate_batches_;
      break;
    case BatchOutcome::Kind::kRejected:
      ++rejected_batches_;
      break;
    case BatchOutcome::Kind::kFailed:
      ++failed_batches_;
      return;  // not a commit: keep it out of the latency
  }
  commit_seconds_.Observe(seconds);
}

IngestStatistics IngestWriter::Statistics() const {
  IngestStatistics s;
  s.stored_batches = stored_batches_;
  s.stored_values = stored_values_;
  s.duplicate_batches = duplicate_batches_;
  s.rejected_batches = rejected_batches_;
  s.failed_batches = failed_batches_;
  s.queued_values = static_cast<int64_t>(queued_values_.load());
  s.commit_seconds = commit_seconds_.Snapshot();
  absl::MutexLock lock(&stall_mu_);
  for (const std::optional<Stall>& stall : stalls_) {
    if (!stall.has_value()) continue;
    if (!s.stalled_since.has_value() || stall->since < *s.stalled_since) {
      s.stalled_since = stall->since;
    }
    s.stalled_on_full_disk = s.stalled_on_full_disk || stall->full_disk;
  }
  return s;
}

void IngestWriter::NoteStalled(int lane, const absl::Status& error) {
  const bool full_disk = absl::StrContains(error.message(), kDiskFull);
  absl::MutexLock lock(&stall_mu_);
  std::optional<Stall>& stall = stalls_[lane];
  if (!stall.has_value()) stall = Stall{absl::Now()};
  stall->full_disk = full_disk;
}

void IngestWriter::NoteCommitting(int lane) {
  absl::MutexLock lock(&stall_mu_);
  stalls_[lane].reset();
}

void IngestWriter::Shutdown(absl::Time deadline) {
  accepting_ = false;
  for (auto& lane : lanes_) lane->Stop(deadline);
}

}  // namespace metrics::storage::pg
