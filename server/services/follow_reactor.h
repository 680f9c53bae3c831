// The reactor of one FollowSeries call: a follower of the FollowHub
// (query/follow_hub.h), which sends it the current answer, then what is new or
// changed after each change of the trial (storage notifications, so commits
// on any metricsd count), one round at a time for all followers of the same
// query; changes arriving during a round fold into the next, so a busy trial
// costs one query per round, not per commit. When the trial reaches a
// terminal state the reactor sends the last changes and finishes with OK.
//
// A reader that leaves a message unread for `slow_reader_limit` while more
// is waiting is dropped with RESOURCE_EXHAUSTED: memory per call stays
// bounded.
//
// Once its first answer is out, its caller's token is watched
// (CallGuard::WatchStream): when it stops authenticating (revoked, expired)
// the follow ends UNAUTHENTICATED.
//
// Lifetime: deletes itself once OnDone has left the hub and no round or
// watch callback holds it.
//
// Thread-safety: reactions and hub rounds run on different threads; shared
// state is under mu_; gRPC operations start after mu_ is released.
#ifndef METRICS_SERVER_SERVICES_FOLLOW_REACTOR_H_
#define METRICS_SERVER_SERVICES_FOLLOW_REACTOR_H_

#include <grpcpp/support/server_callback.h>

#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "proto/metrics/v1/query.pb.h"
#include "query/follow_hub.h"
#include "query/query_engine.h"
#include "server/auth/call_guard.h"
#include "server/services/follow_options.h"
#include "server/services/service_statistics.h"

namespace metrics::server {

class FollowReactor
    : public grpc::ServerWriteReactor<v1::QuerySeriesResponse>,
      public query::FollowHub::Follower {
 public:
  // `check` (may be null) says whether the caller may follow; the hub runs
  // it before anything is read. `guard` (null: authentication off) watches
  // the caller's token once the follow is under way.
  FollowReactor(grpc::CallbackServerContext* context, query::FollowHub* hub,
                query::QueryRequest request, v1::QuerySeriesRequest::View view,
                FollowOptions options, ServiceStatistics::OpenStream open,
                std::function<absl::Status(absl::Time)> check,
                const CallGuard* guard);

  void OnWriteDone(bool ok) override ABSL_LOCKS_EXCLUDED(mu_);
  void OnCancel() override ABSL_LOCKS_EXCLUDED(mu_);
  void OnDone() override ABSL_LOCKS_EXCLUDED(mu_);

  void Deliver(std::shared_ptr<const query::FollowHub::Part> part, bool first,
               bool last, const absl::Status& error) override
      ABSL_LOCKS_EXCLUDED(mu_);
  void Hold() override ABSL_LOCKS_EXCLUDED(mu_);
  void Release() override ABSL_LOCKS_EXCLUDED(mu_);

 private:
  struct Actions {
    bool write = false;
    std::optional<grpc::Status> finish;
  };

  void FinishLocked(grpc::Status status, Actions& actions)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void WriteNextLocked(Actions& actions) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Run(Actions actions);
  // The credential watch's word that the token no longer authenticates.
  void OnRefused(const absl::Status& status) ABSL_LOCKS_EXCLUDED(mu_);

  const CallGuard* const guard_;
  const std::string credential_;  // as presented, for the watch
  const v1::QuerySeriesRequest::View view_;
  const FollowOptions options_;
  const ServiceStatistics::OpenStream open_;
  std::unique_ptr<query::FollowHub::Membership> membership_;

  absl::Mutex mu_;
  // Messages are shared with the other followers of the same part: never
  // changed once made.
  std::shared_ptr<const v1::QuerySeriesResponse> response_;  // gRPC's while
                                                             // writing_
  std::shared_ptr<const v1::QuerySeriesResponse> pending_ ABSL_GUARDED_BY(mu_);
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  absl::Time write_started_ ABSL_GUARDED_BY(mu_);
  bool end_after_writes_ ABSL_GUARDED_BY(mu_) = false;
  std::optional<grpc::Status> finish_after_write_ ABSL_GUARDED_BY(mu_);
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
  bool done_ ABSL_GUARDED_BY(mu_) = false;  // gRPC called OnDone
  bool left_ ABSL_GUARDED_BY(mu_) = false;  // OnDone left the hub
  int refs_ ABSL_GUARDED_BY(mu_) = 0;  // rounds and callbacks holding it
  bool leaving_ ABSL_GUARDED_BY(mu_) = false;  // OnDone began
  std::unique_ptr<CredentialWatch::Watched> watched_ ABSL_GUARDED_BY(mu_);
};

}  // namespace metrics::server

#endif  // METRICS_SERVER_SERVICES_FOLLOW_REACTOR_H_
