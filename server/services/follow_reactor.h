// The reactor of one FollowSeries call. It sends the current answer, then
// subscribes to the trial's changes (storage notifications, so commits on
// any metricsd count): on each, it runs the next query of its
// query::FollowCursor (the tail of the window at the first answer's
// resolution) and sends what the cursor yields as new or changed. When the trial reaches a terminal state it sends the last
// changes and finishes with OK. Queries run on the blocking executor, one
// round at a time per call; changes arriving meanwhile fold into the next
// round, so a busy trial costs one query per round, not per commit.
//
// A reader that leaves a message unread for `slow_reader_limit` while more
// is waiting is dropped with RESOURCE_EXHAUSTED: memory per call stays
// bounded.
//
// Lifetime: deletes itself once OnDone has dropped the subscription and no
// round holds it.
//
// Thread-safety: reactions, executor rounds and notifier callbacks run on
// different threads; shared state is under mu_; gRPC operations start after
// mu_ is released.
#ifndef METRICS_SERVER_SERVICES_FOLLOW_REACTOR_H_
#define METRICS_SERVER_SERVICES_FOLLOW_REACTOR_H_

#include <grpcpp/support/server_callback.h>

#include <functional>
#include <memory>
#include <optional>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "proto/metrics/v1/query.pb.h"
#include "query/follow_cursor.h"
#include "query/query_engine.h"
#include "common/blocking_executor.h"
#include "server/services/service_statistics.h"
#include "storage/metric_store.h"

namespace metrics::server {

struct FollowOptions {
  absl::Duration slow_reader_limit = absl::Seconds(30);
};

class FollowReactor
    : public grpc::ServerWriteReactor<v1::QuerySeriesResponse> {
 public:
  FollowReactor(grpc::CallbackServerContext* context,
                query::QueryEngine* engine, storage::MetricStore* store,
                common::BlockingExecutor* executor, query::QueryRequest request,
                v1::QuerySeriesRequest::View view, FollowOptions options, ServiceStatistics::OpenStream open,
                std::function<absl::Status(absl::Time)> check);

  void OnWriteDone(bool ok) override ABSL_LOCKS_EXCLUDED(mu_);
  void OnCancel() override ABSL_LOCKS_EXCLUDED(mu_);
  void OnDone() override ABSL_LOCKS_EXCLUDED(mu_);

 private:
  struct Actions {
    bool write = false;
    std::optional<grpc::Status> finish;
  };

  // Asks for a round (from the notifier thread or the constructor).
  void Schedule() ABSL_LOCKS_EXCLUDED(mu_);
  // One round, on the executor.
  void Round();
  // The first answer, or what is new or changed since the last round.
  absl::StatusOr<v1::QuerySeriesResponse> NextUpdate(absl::Time deadline);
  // Queues `update` for writing (an empty one only if `always`), ends the
  // call after it if `last`, or ends it with `error`.
  void Deliver(v1::QuerySeriesResponse update, bool always, bool last,
               const absl::Status& error) ABSL_LOCKS_EXCLUDED(mu_);
  void FinishLocked(grpc::Status status, Actions& actions)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void WriteNextLocked(Actions& actions) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Run(Actions actions);
  void Release() ABSL_LOCKS_EXCLUDED(mu_);

  query::QueryEngine* const engine_;
  storage::MetricStore* const store_;
  common::BlockingExecutor* const executor_;
  const v1::QuerySeriesRequest::View view_;
  const FollowOptions options_;
  const ServiceStatistics::OpenStream open_;
  // Whether the caller may follow (null: anyone); run by the first round.
  std::function<absl::Status(absl::Time)> check_;

  // Round state: touched only by the (single) running round.
  const int32_t trial_id_;
  query::FollowCursor cursor_;
  bool sent_first_ = false;  // a first answer, maybe empty, was sent

  std::unique_ptr<storage::ChangeSubscription> subscription_;

  absl::Mutex mu_;
  v1::QuerySeriesResponse response_;  // owned by gRPC while writing_
  std::optional<v1::QuerySeriesResponse> pending_ ABSL_GUARDED_BY(mu_);
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  absl::Time write_started_ ABSL_GUARDED_BY(mu_);
  bool running_ ABSL_GUARDED_BY(mu_) = false;  // a round is queued or running
  bool again_ ABSL_GUARDED_BY(mu_) = false;    // changes came during a round
  bool end_after_writes_ ABSL_GUARDED_BY(mu_) = false;
  std::optional<grpc::Status> finish_after_write_ ABSL_GUARDED_BY(mu_);
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
  bool done_ ABSL_GUARDED_BY(mu_) = false;  // gRPC called OnDone
  bool unsubscribed_ ABSL_GUARDED_BY(mu_) = false;  // OnDone let go of it
  int refs_ ABSL_GUARDED_BY(mu_) = 0;  // rounds holding the reactor
};

}  // namespace metrics::server

#endif  // METRICS_SERVER_SERVICES_FOLLOW_REACTOR_H_
