#include "query/follow_hub.h"

#include <algorithm>
#include <optional>
#include <set>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "query/follow_cursor.h"

namespace metrics::query {

namespace {

// What makes followers share a channel: everything of the query but its
// start (each follower's own) and its resolution (a group per resolution
// inside the channel).
std::string ChannelKey(const QueryRequest& request) {
  std::string key = absl::StrCat(request.trial_id, "|");
  for (const auto* list :
       {&request.names, &request.agent_ids, &request.gpu_uuids}) {
    absl::StrAppend(&key, list->size(), ":");
    for (const std::string& s : *list) absl::StrAppend(&key, s.size(), ":", s);
  }
  absl::StrAppend(&key, "|",
                  request.end ? absl::ToUnixMicros(*request.end) : INT64_MIN);
  return key;
}

// What, with the channel's key, makes a first request: followers whose
// keys are equal and whose cursors have not started can share a cursor.
std::string FirstRequestKey(const QueryRequest& request) {
  return absl::StrCat(request.start ? absl::ToUnixMicros(*request.start)
                                    : INT64_MIN,
                      "|", request.max_points.value_or(-1), "|",
                      request.resolution_us.value_or(-1));
}

}  // namespace

// A follower in its channel. Its fields are touched only by the channel's
// rounds, which run one at a time.
class FollowHub::Member {
 public:
  Member(QueryRequest request,
         std::function<absl::Status(absl::Time)> check, Follower* follower)
      : first_key(FirstRequestKey(request)),
        cursor(std::make_shared<FollowCursor>(std::move(request))),
        check(std::move(check)),
        follower(follower) {}

  const std::string first_key;
  // Shared with the channel's other followers in the same state.
  std::shared_ptr<FollowCursor> cursor;
  std::function<absl::Status(absl::Time)> check;  // until its first round
  Follower* const follower;
  bool sent_first = false;
  bool ended = false;  // told its last answer or an error
};

class FollowHub::Channel : public std::enable_shared_from_this<Channel> {
 public:
  Channel(FollowHub* hub, std::string key, int32_t trial_id,
          std::vector<std::string> agent_ids)
      : hub_(hub), key_(std::move(key)), trial_id_(trial_id),
        agent_ids_(std::move(agent_ids)) {}

  const std::string& key() const { return key_; }

  // Under the hub's lock, once, before the first Schedule. The callback
  // holds no reference: the subscription goes before the channel does.
  void Subscribe() {
    std::unique_ptr<storage::ChangeSubscription> subscription =
        hub_->store_->SubscribeToChanges(trial_id_, agent_ids_,
                                         [this] { Schedule(); });
    absl::MutexLock lock(&mu_);
    subscription_ = std::move(subscription);
  }

  void Add(std::shared_ptr<Member> member) ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    members_.push_back(std::move(member));
  }

  // Removes `member`; when none is left, hands over the subscription (to be
  // dropped outside every lock). True when none is left.
  bool Remove(const std::shared_ptr<Member>& member,
              std::unique_ptr<storage::ChangeSubscription>& subscription)
      ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    members_.erase(std::remove(members_.begin(), members_.end(), member),
                   members_.end());
    if (!members_.empty()) return false;
    subscription = std::move(subscription_);
    return true;
  }

  // Asks for a round: now, or after the one running.
  void Schedule() ABSL_LOCKS_EXCLUDED(mu_) {
    {
      absl::MutexLock lock(&mu_);
      if (running_) {
        again_ = true;
        return;
      }
      running_ = true;
    }
    Post();
  }

 private:
  void Post() {
    if (hub_->executor_->Post([self = shared_from_this()] { self->Round(); })) {
      return;
    }
    std::vector<std::shared_ptr<Member>> members = HoldMembers();
    {
      absl::MutexLock lock(&mu_);
      running_ = false;
      again_ = false;
    }
    const absl::Status busy =
        absl::ResourceExhaustedError("the server is busy; follow again later");
    for (const std::shared_ptr<Member>& m : members) {
      if (!m->ended) {
        m->ended = true;
        m->follower->Deliver(nullptr, false, true, busy);
      }
      m->follower->Release();
    }
  }

  // The members now, each held until the round releases it.
  std::vector<std::shared_ptr<Member>> HoldMembers() ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    for (const std::shared_ptr<Member>& m : members_) m->follower->Hold();
    return members_;
  }

  void Round() {
    const absl::Time deadline = absl::Now() + hub_->round_timeout_;
    std::vector<std::shared_ptr<Member>> members = HoldMembers();
    std::vector<absl::Status> errors(members.size());
    // A stranger learns nothing: the check comes before any read.
    bool any = false;
    for (size_t i = 0; i < members.size(); ++i) {
      Member& m = *members[i];
      if (m.ended) continue;
      if (m.check) {
        errors[i] = m.check(deadline);
        m.check = nullptr;  // once per follow
      }
      any = any || errors[i].ok();
    }
    absl::StatusOr<storage::Trial> trial =
        any ? hub_->store_->GetTrial(trial_id_, deadline)
            : absl::StatusOr<storage::Trial>(storage::Trial{});
    const bool terminal = trial.ok() && storage::IsTerminal(trial->state);
    std::vector<size_t> live;
    for (size_t i = 0; i < members.size(); ++i) {
      if (members[i]->ended || !errors[i].ok()) continue;
      if (!trial.ok()) {
        errors[i] = trial.status();
        continue;
      }
      live.push_back(i);
    }
    ShareCursors(members, live);

    // Each cursor once: those not started (new followers, or still without
    // data) ask their whole query; the others share one query of the tail
    // per resolution, from the earliest tail among them.
    struct Work {
      std::shared_ptr<const Part> part;
      absl::Status error;
    };
    std::map<const FollowCursor*, Work> work;
    struct Group {
      QueryRequest request;
      std::vector<FollowCursor*> cursors;
    };
    std::map<int64_t, Group> groups;
    const absl::Time now = absl::Now();
    for (size_t i : live) {
      FollowCursor* cursor = members[i]->cursor.get();
      if (!work.emplace(cursor, Work{}).second) continue;
      if (!cursor->started()) {
        absl::StatusOr<std::optional<QueryResult>> whole =
            Whole(*cursor, deadline);
        if (!whole.ok()) {
          work[cursor].error = whole.status();
        } else if (*whole) {
          work[cursor].part = std::make_shared<const Part>(**std::move(whole));
        }
        continue;
      }
      std::optional<QueryRequest> tail = cursor->NextRequest(now);
      if (!tail) continue;  // the window is over: nothing more can come
      Group& group = groups[tail->resolution_us.value_or(0)];
      if (group.cursors.empty() || *tail->start < *group.request.start) {
        group.request = *std::move(tail);
      }
      group.cursors.push_back(cursor);
    }
    for (auto& [resolution, group] : groups) {
      absl::StatusOr<QueryResult> answer =
          hub_->engine_->Query(group.request, deadline);
      for (FollowCursor* cursor : group.cursors) {
        if (!answer.ok()) {
          work[cursor].error = answer.status();
          continue;
        }
        QueryResult part = cursor->Take(*answer);
        if (!part.series.empty()) {
          work[cursor].part = std::make_shared<const Part>(std::move(part));
        }
      }
    }
    for (size_t i = 0; i < members.size(); ++i) {
      Member& m = *members[i];
      if (!m.ended) {
        std::shared_ptr<const Part> part;
        if (auto it = work.find(m.cursor.get());
            errors[i].ok() && it != work.end()) {
          errors[i] = it->second.error;
          part = it->second.part;
        }
        // The first answer goes out even when empty; a later round that
        // finds nothing (a resync after the notifier reconnected) sends
        // nothing.
        const bool first = !m.sent_first;
        m.sent_first = true;
        m.ended = terminal || !errors[i].ok();
        m.follower->Deliver(std::move(part), first, terminal, errors[i]);
      }
      m.follower->Release();
    }
    bool again;
    {
      absl::MutexLock lock(&mu_);
      again = again_;
      again_ = false;
      running_ = again;
    }
    if (again) Post();
  }

  // Lets the live members whose cursors are in the same state share one:
  // not started with the same first request, or started and in the same
  // state (a follower that joined late, once it took the tail the others
  // took).
  static void ShareCursors(const std::vector<std::shared_ptr<Member>>& members,
                           const std::vector<size_t>& live) {
    std::set<const FollowCursor*> seen;
    std::vector<const Member*> kept;  // a member per distinct cursor kept
    for (size_t i : live) {
      Member& m = *members[i];
      if (seen.count(m.cursor.get()) > 0) continue;
      bool shared = false;
      for (const Member* k : kept) {
        const bool same =
            k->cursor->started()
                ? k->cursor->SameStateAs(*m.cursor)
                : !m.cursor->started() && k->first_key == m.first_key;
        if (same) {
          m.cursor = k->cursor;
          shared = true;
          break;
        }
      }
      if (!shared) {
        seen.insert(m.cursor.get());
        kept.push_back(&m);
      }
    }
  }

  // A cursor's whole query, at one resolution; what it yields (none when
  // its window is over).
  absl::StatusOr<std::optional<QueryResult>> Whole(
      FollowCursor& cursor, absl::Time deadline) {
    std::optional<QueryRequest> request = cursor.NextRequest(absl::Now());
    if (!request) return std::nullopt;
    absl::StatusOr<QueryResult> answer =
        hub_->engine_->Query(*request, deadline);
    if (!answer.ok()) return answer.status();
    if (std::optional<QueryRequest> again =
            cursor.AtOneResolution(*answer)) {
      answer = hub_->engine_->Query(*again, deadline);
      if (!answer.ok()) return answer.status();
    }
    return cursor.Take(*std::move(answer));
  }

  FollowHub* const hub_;
  const std::string key_;
  const int32_t trial_id_;
  // Only their commits can change the channel's answers.
  const std::vector<std::string> agent_ids_;

  absl::Mutex mu_;
  std::vector<std::shared_ptr<Member>> members_ ABSL_GUARDED_BY(mu_);
  bool running_ ABSL_GUARDED_BY(mu_) = false;  // a round is queued or running
  bool again_ ABSL_GUARDED_BY(mu_) = false;    // asked for during a round
  // Last, so that it goes first: once dropped, its callback is not running.
  std::unique_ptr<storage::ChangeSubscription> subscription_
      ABSL_GUARDED_BY(mu_);
};

FollowHub::FollowHub(QueryEngine* engine, storage::MetricStore* store,
                     common::BlockingExecutor* executor, absl::Duration round_timeout)
    : engine_(engine), store_(store), executor_(executor), round_timeout_(round_timeout) {}

FollowHub::~FollowHub() = default;

std::unique_ptr<FollowHub::Membership> FollowHub::Join(
    QueryRequest request, std::function<absl::Status(absl::Time)> check,
    Follower* follower) {
  class Joined : public Membership {
   public:
    Joined(FollowHub* hub, std::shared_ptr<Channel> channel,
           std::shared_ptr<Member> member)
        : hub_(hub), channel_(std::move(channel)), member_(std::move(member)) {}
    ~Joined() override { hub_->Leave(channel_, member_); }

   private:
    FollowHub* const hub_;
    const std::shared_ptr<Channel> channel_;
    const std::shared_ptr<Member> member_;
  };
  const std::string key = ChannelKey(request);
  const int32_t trial_id = request.trial_id;
  std::vector<std::string> agent_ids = request.agent_ids;
  auto member =
      std::make_shared<Member>(std::move(request), std::move(check), follower);
  std::shared_ptr<Channel> channel;
  {
    absl::MutexLock lock(&mu_);
    std::shared_ptr<Channel>& slot = channels_[key];
    if (slot == nullptr) {
      slot = std::make_shared<Channel>(this, key, trial_id,
                                       std::move(agent_ids));
      slot->Subscribe();
    }
    channel = slot;
    channel->Add(member);
  }
  channel->Schedule();  // its first answer
  return std::make_unique<Joined>(this, std::move(channel), std::move(member));
}

void FollowHub::Leave(const std::shared_ptr<Channel>& channel,
                      const std::shared_ptr<Member>& member) {
  std::unique_ptr<storage::ChangeSubscription> subscription;
  std::shared_ptr<Channel> keep;  // until the subscription is gone
  {
    absl::MutexLock lock(&mu_);
    if (channel->Remove(member, subscription)) {
      auto it = channels_.find(channel->key());
      if (it != channels_.end() && it->second == channel) {
        keep = std::move(it->second);
        channels_.erase(it);
      }
    }
  }
  subscription.reset();
}

size_t FollowHub::channels() const {
  absl::MutexLock lock(&mu_);
  return channels_.size();
}

}  // namespace metrics::query
