#include "server/follow_reactor.h"

#include <grpcpp/server_context.h>

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/grpc_status.h"
#include "server/proto_convert.h"
#include "server/unary_call.h"

namespace metrics::server {

namespace {

constexpr size_t kTailBuckets = 2;  // the buckets a round re-reads

void AppendBucket(query::SeriesData& out, int64_t start,
                  const query::SeriesData& in, size_t i) {
  out.bucket_start_us.push_back(start);
  out.count.push_back(in.count[i]);
  out.sum.push_back(in.sum[i]);
  out.min.push_back(in.min[i]);
  out.max.push_back(in.max[i]);
  out.mean.push_back(in.mean[i]);
  out.first_time_us.push_back(in.first_time_us[i]);
  out.first_value.push_back(in.first_value[i]);
  out.last_time_us.push_back(in.last_time_us[i]);
  out.last_value.push_back(in.last_value[i]);
}

storage::RollupStats StatsOf(const query::SeriesData& d, size_t i) {
  storage::RollupStats s;
  s.count = d.count[i];
  s.sum = d.sum[i];
  s.min = d.min[i];
  s.max = d.max[i];
  s.first_time_us = d.first_time_us[i];
  s.first_value = d.first_value[i];
  s.last_time_us = d.last_time_us[i];
  s.last_value = d.last_value[i];
  return s;
}

}  // namespace

FollowReactor::FollowReactor(grpc::CallbackServerContext*,
                             query::QueryEngine* engine,
                             storage::MetricStore* store,
                             BlockingExecutor* executor,
                             query::QueryRequest request, FollowOptions options,
                             ServiceFigures::OpenStream open)
    : engine_(engine),
      store_(store),
      executor_(executor),
      options_(options),
      open_(std::move(open)),
      request_(std::move(request)) {
  subscription_ = store_->SubscribeToChanges(request_.trial_id,
                                             [this] { Schedule(); });
  Schedule();  // the first answer
}

void FollowReactor::Schedule() {
  Actions actions;
  {
    absl::MutexLock lock(&mu_);
    if (done_ || finished_) return;
    if (running_) {
      again_ = true;
      return;
    }
    running_ = true;
    ++refs_;
    if (!executor_->Post([this] { Round(); })) {
      --refs_;
      running_ = false;
      FinishLocked(grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED,
                                "the server is busy; follow again later"),
                   actions);
    }
  }
  Run(std::move(actions));
}

void FollowReactor::Round() {
  const absl::Time deadline = absl::Now() + kStoreCallTimeout;
  absl::StatusOr<storage::Trial> trial =
      store_->GetTrial(request_.trial_id, deadline);
  const bool first = !answered_;
  absl::StatusOr<v1::QuerySeriesResponse> update =
      !trial.ok() ? absl::StatusOr<v1::QuerySeriesResponse>(trial.status())
      : first     ? FirstAnswer(deadline)
                  : Changes(deadline);
  const bool terminal = trial.ok() && storage::IsTerminal(trial->state);
  if (update.ok()) {
    // The first answer goes out even when empty; a later round that still
    // finds nothing (a resync after the notifier reconnected) sends nothing.
    Deliver(*std::move(update), first && !sent_first_, terminal,
            absl::OkStatus());
    sent_first_ = true;
  } else {
    Deliver({}, false, true, update.status());
  }
  {
    absl::MutexLock lock(&mu_);
    if (again_ && !finished_ && !done_) {
      again_ = false;
      ++refs_;
      if (!executor_->Post([this] { Round(); })) {
        --refs_;
        running_ = false;
      }
    } else {
      running_ = false;
    }
  }
  Release();
}

absl::StatusOr<v1::QuerySeriesResponse> FollowReactor::FirstAnswer(
    absl::Time deadline) {
  absl::StatusOr<query::QueryResult> result = engine_->Query(request_, deadline);
  if (!result.ok()) return result.status();
  // Follow at one resolution: the coarsest the series were answered at, or
  // raw points if all were.
  int64_t resolution = 0;
  bool mixed = false, any = false;
  for (const query::SeriesData& d : result->series) {
    if (d.count.empty()) continue;
    if (any && d.resolution_us != resolution) mixed = true;
    resolution = std::max(resolution, d.resolution_us);
    any = true;
  }
  if (mixed) {
    query::QueryRequest again = request_;
    again.resolution_us = resolution;
    result = engine_->Query(again, deadline);
    if (!result.ok()) return result.status();
  }
  v1::QuerySeriesResponse response;
  QueryResultToProto(*result, &response);
  if (!any) return response;  // nothing stored yet: the next round starts over
  answered_ = true;
  resolution_us_ = resolution;
  request_.resolution_us = resolution;
  for (const query::SeriesData& d : result->series) {
    if (d.count.empty()) continue;
    Tail& tail = tails_[d.series.series_id];
    for (size_t i = 0; i < d.count.size(); ++i) {
      if (resolution_us_ == 0) {
        if (d.bucket_start_us[i] != tail.last_time_us) tail.sent_at_last = 0;
        tail.last_time_us = d.bucket_start_us[i];
        ++tail.sent_at_last;
      } else if (i + kTailBuckets >= d.count.size()) {
        tail.buckets[d.bucket_start_us[i]] = StatsOf(d, i);
      }
    }
  }
  return response;
}

absl::StatusOr<v1::QuerySeriesResponse> FollowReactor::Changes(
    absl::Time deadline) {
  int64_t tail_start = INT64_MAX;
  for (const auto& [id, tail] : tails_) {
    const int64_t start = resolution_us_ == 0 ? tail.last_time_us
                          : tail.buckets.empty()
                              ? INT64_MAX
                              : tail.buckets.begin()->first;
    tail_start = std::min(tail_start, start);
  }
  query::QueryRequest request = request_;
  request.start = absl::FromUnixMicros(tail_start);
  if (!request.end) request.end = absl::Now() + absl::Hours(24);
  v1::QuerySeriesResponse response;
  if (*request.start >= *request.end) return response;
  absl::StatusOr<query::QueryResult> result = engine_->Query(request, deadline);
  if (!result.ok()) return result.status();

  query::QueryResult changes;
  changes.start_us = result->start_us;
  changes.end_us = result->end_us;
  for (const query::SeriesData& d : result->series) {
    if (d.count.empty()) continue;
    Tail& tail = tails_[d.series.series_id];  // new series: an empty tail
    query::SeriesData changed;
    changed.series = d.series;
    changed.resolution_us = resolution_us_;
    const int64_t prev_last = tail.last_time_us;
    const int64_t prev_sent = tail.sent_at_last;
    int64_t seen_at_prev = 0;
    for (size_t i = 0; i < d.count.size(); ++i) {
      const int64_t start = d.bucket_start_us[i];
      if (resolution_us_ == 0) {
        // Raw points come in (time, ingest) order: skip those sent before,
        // including the ones already sent at the last time.
        if (start < prev_last) continue;
        if (start == prev_last && ++seen_at_prev <= prev_sent) continue;
        if (start == tail.last_time_us) {
          ++tail.sent_at_last;
        } else {
          tail.last_time_us = start;
          tail.sent_at_last = 1;
        }
        AppendBucket(changed, start, d, i);
        continue;
      }
      const storage::RollupStats stats = StatsOf(d, i);
      auto known = tail.buckets.find(start);
      if (known != tail.buckets.end() && known->second == stats) continue;
      tail.buckets[start] = stats;
      AppendBucket(changed, start, d, i);
    }
    while (tail.buckets.size() > kTailBuckets) {
      tail.buckets.erase(tail.buckets.begin());
    }
    if (!changed.count.empty()) changes.series.push_back(std::move(changed));
  }
  if (!changes.series.empty()) QueryResultToProto(changes, &response);
  return response;
}

void FollowReactor::Deliver(v1::QuerySeriesResponse update, bool always,
                            bool last, const absl::Status& error) {
  Actions actions;
  {
    absl::MutexLock lock(&mu_);
    if (finished_ || done_) return;
    if (!error.ok()) {
      FinishLocked(common::ToGrpcStatus(error), actions);
    } else {
      if (always || update.series_size() > 0) {
        if (!writing_) {
          response_ = std::move(update);
          writing_ = true;
          write_started_ = absl::Now();
          actions.write = true;
        } else if (absl::Now() - write_started_ > options_.slow_reader_limit) {
          FinishLocked(
              grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED,
                           absl::StrCat("the client read nothing for ",
                                        absl::FormatDuration(
                                            options_.slow_reader_limit),
                                        "; follow again")),
              actions);
        } else if (pending_) {
          // Later changes follow earlier ones: the client applies in order.
          for (v1::SeriesBuckets& s : *update.mutable_series()) {
            *pending_->add_series() = std::move(s);
          }
        } else {
          pending_ = std::move(update);
        }
      }
      if (last && !finished_) {
        end_after_writes_ = true;
        if (!writing_ && !pending_) FinishLocked(grpc::Status::OK, actions);
      }
    }
  }
  Run(std::move(actions));
}

void FollowReactor::WriteNextLocked(Actions& actions) {
  if (pending_) {
    response_ = std::move(*pending_);
    pending_.reset();
    writing_ = true;
    write_started_ = absl::Now();
    actions.write = true;
  } else if (end_after_writes_) {
    FinishLocked(grpc::Status::OK, actions);
  }
}

void FollowReactor::OnWriteDone(bool ok) {
  Actions actions;
  {
    absl::MutexLock lock(&mu_);
    writing_ = false;
    if (!ok && !finished_) {
      finished_ = true;
      actions.finish = grpc::Status(grpc::StatusCode::UNAVAILABLE,
                                    "writing to the client failed");
    } else if (finished_) {
      if (finish_after_write_) {
        actions.finish = std::move(*finish_after_write_);
        finish_after_write_.reset();
      }
    } else {
      WriteNextLocked(actions);
    }
  }
  Run(std::move(actions));
}

void FollowReactor::OnCancel() {
  Actions actions;
  {
    absl::MutexLock lock(&mu_);
    FinishLocked(grpc::Status(grpc::StatusCode::CANCELLED,
                              "the client cancelled the follow"),
                 actions);
  }
  Run(std::move(actions));
}

void FollowReactor::OnDone() {
  {
    absl::MutexLock lock(&mu_);
    done_ = true;
  }
  // Once this returns, the notifier will not call Schedule again.
  subscription_.reset();
  bool last;
  {
    absl::MutexLock lock(&mu_);
    last = refs_ == 0;
  }
  if (last) delete this;
}

void FollowReactor::FinishLocked(grpc::Status status, Actions& actions) {
  if (finished_) return;
  finished_ = true;
  pending_.reset();
  if (writing_) {
    finish_after_write_ = std::move(status);
  } else {
    actions.finish = std::move(status);
  }
}

void FollowReactor::Run(Actions actions) {
  if (actions.write) StartWrite(&response_);
  if (actions.finish) Finish(std::move(*actions.finish));
}

void FollowReactor::Release() {
  bool last;
  {
    absl::MutexLock lock(&mu_);
    --refs_;
    last = done_ && refs_ == 0;
  }
  if (last) delete this;
}

}  // namespace metrics::server
