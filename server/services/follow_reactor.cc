#include "server/services/follow_reactor.h"

#include <grpcpp/server_context.h>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/grpc_status.h"
#include "server/services/proto_convert.h"
#include "server/services/unary_call.h"

namespace metrics::server {

FollowReactor::FollowReactor(grpc::CallbackServerContext* context,
                             query::FollowHub* hub, query::QueryRequest request,
                             v1::QuerySeriesRequest::View view,
                             FollowOptions options,
                             ServiceStatistics::OpenStream open,
                             std::function<absl::Status(absl::Time)> check,
                             const CallGuard* guard)
    : guard_(guard),
      credential_(guard != nullptr ? CallGuard::CredentialOf(*context) : ""),
      view_(view),
      options_(options),
      open_(std::move(open)) {
  membership_ = hub->Join(std::move(request), std::move(check), this);
}

void FollowReactor::Hold() {
  absl::MutexLock lock(&mu_);
  ++refs_;
}

void FollowReactor::Release() {
  bool last;
  {
    absl::MutexLock lock(&mu_);
    --refs_;
    last = left_ && refs_ == 0;
  }
  if (last) delete this;
}

void FollowReactor::Deliver(std::shared_ptr<const query::FollowHub::Part> part,
                            bool always, bool last,
                            const absl::Status& error) {
  // Made once per part and view, for every follower of it.
  std::shared_ptr<const v1::QuerySeriesResponse> update =
      part ? part->Rendered<v1::QuerySeriesResponse>(
                 view_,
                 [this](const query::QueryResult& result) {
                   auto made = std::make_shared<v1::QuerySeriesResponse>();
                   QueryResultToProto(result, view_, made.get());
                   return std::shared_ptr<const v1::QuerySeriesResponse>(std::move(made));
                 })
           : nullptr;
  const bool any = update != nullptr && update->series_size() > 0;
  // Registered outside mu_, which the callback takes; dropped, when not
  // kept, at the end of this call, outside it too.
  std::unique_ptr<CredentialWatch::Watched> watched;
  if (always && error.ok() && guard_ != nullptr) {
    watched = guard_->WatchStream(
        credential_, [this](absl::Status refused) { OnRefused(refused); });
  }
  Actions actions;
  {
    absl::MutexLock lock(&mu_);
    if (!leaving_ && watched != nullptr) watched_ = std::move(watched);
    if (finished_ || done_) return;
    if (!error.ok()) {
      FinishLocked(common::ToGrpcStatus(error), actions);
    } else {
      if (always || any) {
        if (update == nullptr) {
          update = std::make_shared<const v1::QuerySeriesResponse>();
        }
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
          auto merged = std::make_shared<v1::QuerySeriesResponse>(*pending_);
          for (const v1::SeriesBuckets& s : update->series()) {
            *merged->add_series() = s;
          }
          pending_ = std::move(merged);
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
    response_ = std::move(pending_);
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

void FollowReactor::OnRefused(const absl::Status& status) {
  // OnDone waits for this callback before it leaves, so the reactor is
  // alive; the hold keeps it past a Finish that runs OnDone on this thread.
  Hold();
  Actions actions;
  {
    absl::MutexLock lock(&mu_);
    if (!done_) FinishLocked(common::ToGrpcStatus(status), actions);
  }
  Run(std::move(actions));
  Release();
}

void FollowReactor::OnDone() {
  std::unique_ptr<CredentialWatch::Watched> watched;
  {
    absl::MutexLock lock(&mu_);
    leaving_ = true;
    watched = std::move(watched_);
  }
  // Waits for a running OnRefused, which takes mu_; none starts after.
  watched.reset();
  {
    absl::MutexLock lock(&mu_);
    done_ = true;
  }
  // Once this returns, no round takes the reactor again.
  membership_.reset();
  bool last;
  {
    // Only now may a round's Release delete the reactor: before, it could
    // free it under this very call.
    absl::MutexLock lock(&mu_);
    left_ = true;
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
  // gRPC only reads the message (serializes it), which is safe while other
  // followers write the same message; it lives until OnWriteDone.
  if (actions.write) StartWrite(response_.get());
  if (actions.finish) Finish(std::move(*actions.finish));
}

}  // namespace metrics::server
