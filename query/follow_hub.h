// Followers of the same query share its rounds. Followers of one trial and
// selection of series (names, agents, GPUs, window end) form a channel: it
// subscribes once to the trial's changes and, on each, runs one round on
// the executor: one trial lookup, and one query of the window's tail per
// resolution its followers are at, whose answer each follower's own
// query::FollowCursor turns into what is new or changed for it. A follower
// still without data (one that just joined) gets its own whole query in the
// next round, so it starts from the current answer; rounds of a channel run
// one at a time and each reads after the one before, so no follower's
// answers go back in time, and one that joins during a round waits for the
// next.
//
// So N viewers of a trial's chart cost one query per change, not N. The
// work per follower is shared too: followers whose cursors are in the same
// state (the same first request, or the same tail taken) share one cursor,
// so a round takes each answer once per state, and hands each of them the
// same Part, which the server renders once per view. A channel hears only the
// commits of the agents it selects (all, when it selects none).
//
// Query logic only: a round's outcome is a QueryResult, and the server
// renders it (a message per view) once per Part, through Part::Rendered.
//
// Thread-safety: thread-safe. Rounds run on the executor; Deliver is called
// from them, for one follower at a time.
#ifndef METRICS_QUERY_FOLLOW_HUB_H_
#define METRICS_QUERY_FOLLOW_HUB_H_

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/blocking_executor.h"
#include "query/query_engine.h"
#include "storage/metric_store.h"

namespace metrics::query {

class FollowHub {
 public:
  // What a round yields for the followers in one state: one object for all
  // of them.
  //
  // Thread-safety: thread-safe.
  class Part {
   public:
    explicit Part(QueryResult result) : result_(std::move(result)) {}

    const QueryResult& result() const { return result_; }

    // What `render` makes of the result for `view`, made on first use and
    // shared by every follower asking for that view. One caller, one T:
    // every call for a view must ask for the same type.
    template <typename T>
    std::shared_ptr<const T> Rendered(
        int view, absl::FunctionRef<std::shared_ptr<const T>(const QueryResult&)> render)
        const ABSL_LOCKS_EXCLUDED(mu_) {
      absl::MutexLock lock(&mu_);
      std::shared_ptr<const void>& made = rendered_[view];
      if (made == nullptr) made = render(result_);
      return std::static_pointer_cast<const T>(made);
    }

   private:
    const QueryResult result_;
    mutable absl::Mutex mu_;
    mutable std::map<int, std::shared_ptr<const void>> rendered_ ABSL_GUARDED_BY(mu_);
  };

  // One follower, as the hub sees it.
  class Follower {
   public:
    virtual ~Follower() = default;
    // A round's outcome for it: `part`, its first answer or what is new or
    // changed (null: nothing); `first`: the first outcome, to be sent even
    // when empty; `last`: the trial ended and nothing follows. A non-OK
    // `error` ends the follow.
    virtual void Deliver(std::shared_ptr<const Part> part, bool first,
                         bool last, const absl::Status& error) = 0;
    // A round holds the follower from before it reads until after Deliver:
    // it must outlive the hold, even after it left.
    virtual void Hold() = 0;
    virtual void Release() = 0;
  };

  // Leaves the channel on destruction: no round takes the follower after.
  class Membership {
   public:
    virtual ~Membership() = default;
  };

  // The engine, store and executor must outlive the hub. Each round's
  // reads end by `round_timeout` after it starts.
  FollowHub(QueryEngine* engine, storage::MetricStore* store,
            common::BlockingExecutor* executor, absl::Duration round_timeout);
  ~FollowHub();

  FollowHub(const FollowHub&) = delete;
  FollowHub& operator=(const FollowHub&) = delete;

  // Joins `follower` to the followers of `request`'s trial and series; its
  // first round comes soon. `check` (may be null) runs first in that round:
  // a non-OK status ends the follow with it, before anything is read.
  std::unique_ptr<Membership> Join(
      QueryRequest request,
      std::function<absl::Status(absl::Time)> check, Follower* follower);

  // Channels open now (for tests and /metrics).
  size_t channels() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  class Channel;
  class Member;

  void Leave(const std::shared_ptr<Channel>& channel,
             const std::shared_ptr<Member>& member) ABSL_LOCKS_EXCLUDED(mu_);

  QueryEngine* const engine_;
  storage::MetricStore* const store_;
  common::BlockingExecutor* const executor_;
  const absl::Duration round_timeout_;

  mutable absl::Mutex mu_;
  std::map<std::string, std::shared_ptr<Channel>> channels_
      ABSL_GUARDED_BY(mu_);
};

}  // namespace metrics::query

#endif  // METRICS_QUERY_FOLLOW_HUB_H_
