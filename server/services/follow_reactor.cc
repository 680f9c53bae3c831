#include "server/services/follow_reactor.h"

#include <grpcpp/server_context.h>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/grpc_status.h"
#include "server/services/proto_convert.h"
#include "server/services/unary_call.h"

namespace metrics::server {

FollowReactor::FollowReactor(grpc::CallbackServerContext*,
                             query::QueryEngine* engine,
                             storage::MetricStore* store,
                             common::BlockingExecutor* executor,
                             query::QueryRequest request,
                             v1::QuerySeriesRequest::View view,
                             FollowOptions options,
                             ServiceStatistics::OpenStream open,
                             std::function<absl::Status(absl::Time)> check)
    : engine_(engine),
      store_(store),
      executor_(executor),
      view_(view),
      options_(options),
      open_(std::move(open)),
      check_(std::move(check)),
      trial_id_(request.trial_id),
      cursor_(std::move(request)) {
  subscription_ = store_->SubscribeToChanges(trial_id_,
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
  if (check_) {
    absl::Status allowed = check_(deadline);
    check_ = nullptr;  // once per call
    if (!allowed.ok()) {
      Deliver({}, false, true, allowed);
      Release();
      return;
    }
  }
  absl::StatusOr<storage::Trial> trial = store_->GetTrial(trial_id_, deadline);
  const bool first = !cursor_.started();
  absl::StatusOr<v1::QuerySeriesResponse> update =
      trial.ok() ? NextUpdate(deadline)
                 : absl::StatusOr<v1::QuerySeriesResponse>(trial.status());
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

absl::StatusOr<v1::QuerySeriesResponse> FollowReactor::NextUpdate(
    absl::Time deadline) {
  v1::QuerySeriesResponse response;
  std::optional<query::QueryRequest> request =
      cursor_.NextRequest(absl::Now());
  if (!request) return response;
  absl::StatusOr<query::QueryResult> answer =
      engine_->Query(*request, deadline);
  if (!answer.ok()) return answer.status();
  if (std::optional<query::QueryRequest> again =
          cursor_.AtOneResolution(*answer)) {
    answer = engine_->Query(*again, deadline);
    if (!answer.ok()) return answer.status();
  }
  const bool first = !cursor_.started();
  query::QueryResult part = cursor_.Take(*std::move(answer));
  if (first || !part.series.empty()) QueryResultToProto(part, view_, &response);
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
    // Only now may a round's Release delete the reactor: before, it could
    // free it under this very call.
    absl::MutexLock lock(&mu_);
    unsubscribed_ = true;
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
    last = unsubscribed_ && refs_ == 0;
  }
  if (last) delete this;
}

}  // namespace metrics::server
