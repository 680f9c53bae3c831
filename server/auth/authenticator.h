// Turns an "authorization: Bearer <token>" value into the caller's
// Principal. Answers for usable tokens come from a bounded cache while
// fresh (at most `recheck` old), so a stream or a busy client costs no
// database query per call, and a revocation takes effect within `recheck`
// on every metricsd of the database. Expiry is checked on every call.
//
// Refusing is made much cheaper than serving. Text not shaped like a token
// is refused without a look-up; a token refused recently (unknown, revoked,
// expired: none of them can become usable) is remembered by its hash for
// `refused_lifetime`, so repeating it costs no look-up either; and with a
// PeerLimiter, a peer that failed too often is refused RESOURCE_EXHAUSTED
// before any look-up, unless it presents a token this server knows to be
// usable (a good client behind the same address keeps working).
//
// Every failure to authenticate (no header, not a Bearer token, a token
// unknown, expired or revoked) is the same UNAUTHENTICATED message, which
// never says which, nor quotes the token.
//
// Thread-safety: thread-safe.
#ifndef METRICS_SERVER_AUTH_AUTHENTICATOR_H_
#define METRICS_SERVER_AUTH_AUTHENTICATOR_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "server/auth/access_rules.h"
#include "server/auth/peer_limiter.h"
#include "storage/token_store.h"

namespace metrics::server {

struct AuthenticatorOptions {
  // How old a cached answer may be; revocation takes effect within it.
  absl::Duration recheck = absl::Seconds(4);
  // Usable tokens cached at most (about 150 bytes each); the cache is
  // cleared when full (only holders of usable tokens can fill it).
  size_t max_cached = 100000;
  // Refused tokens remembered at most (about 100 bytes each), and for how
  // long. The oldest half is dropped when full, so a flood of distinct
  // tokens costs bounded memory and pushes out nothing else.
  size_t max_refused = 100000;
  absl::Duration refused_lifetime = absl::Minutes(1);
  // Where "peer X is being limited" goes (once a peer and report period).
  std::function<void(absl::string_view)> log;
  std::function<absl::Time()> clock = [] { return absl::Now(); };
};

// Refusals so far, for /metrics.
struct AuthRefusals {
  int64_t unauthenticated = 0;  // UNAUTHENTICATED answers
  int64_t limited = 0;          // RESOURCE_EXHAUSTED: the peer was limited
};

class Authenticator {
 public:
  // `store` and `limiter` (null: no limit) must outlive the authenticator.
  Authenticator(storage::TokenStore* store, AuthenticatorOptions options,
                PeerLimiter* limiter = nullptr);

  // The caller of `authorization` (the header's value; empty when absent),
  // calling from `peer` (its address; empty: not limited, for checks of a
  // stream already open). May query the store: call it where blocking is
  // allowed. UNAUTHENTICATED as above; RESOURCE_EXHAUSTED with a
  // common::RetryAfterOf when the peer is limited; the store's own errors
  // (UNAVAILABLE, ...) when it cannot say.
  absl::StatusOr<Principal> Authenticate(absl::string_view authorization,
                                         absl::string_view peer,
                                         absl::Time deadline)
      ABSL_LOCKS_EXCLUDED(mu_);

  // As Authenticate, without the store: nullopt when only a look-up could
  // answer. Never blocks on the database (for reactor threads).
  std::optional<absl::StatusOr<Principal>> FromCache(
      absl::string_view authorization, absl::string_view peer)
      ABSL_LOCKS_EXCLUDED(mu_);

  // Forgets any refusal of `secret`: a token just created works at once.
  void Created(absl::string_view secret) ABSL_LOCKS_EXCLUDED(mu_);

  AuthRefusals refusals() const;

 private:
  struct Entry {
    storage::ApiToken token;  // usable when fetched
    absl::Time fetched;
  };

  // The cache key of a header value: the SHA-256 of its token, or "" when
  // it carries no token.
  static std::string KeyOf(absl::string_view authorization);
  absl::StatusOr<Principal> Judge(const storage::ApiToken& token) const;
  // What the caches say of `key` from `peer`: nullopt when only the store
  // can answer.
  std::optional<absl::StatusOr<Principal>> FromCaches(const std::string& key,
                                                      absl::string_view peer)
      ABSL_LOCKS_EXCLUDED(mu_);
  bool RefusedLocked(const std::string& key, absl::Time now) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void RememberRefusalLocked(const std::string& key, absl::Time now)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Counts a refusal of `peer` (and tells the limiter); returns it.
  absl::Status Refuse(absl::string_view peer);

  storage::TokenStore* const store_;
  const AuthenticatorOptions options_;
  PeerLimiter* const limiter_;
  mutable absl::Mutex mu_;
  absl::flat_hash_map<std::string, Entry> usable_ ABSL_GUARDED_BY(mu_);
  // Refused keys and when; `refused_` fills, then becomes `refused_older_`.
  absl::flat_hash_map<std::string, absl::Time> refused_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<std::string, absl::Time> refused_older_
      ABSL_GUARDED_BY(mu_);
  std::atomic<int64_t> unauthenticated_{0};
  std::atomic<int64_t> limited_{0};
};

// The one answer to every caller that did not authenticate.
absl::Status Unauthenticated();

// The answer to a limited peer, asking it to wait `wait`.
absl::Status PeerLimited(absl::Duration wait);

}  // namespace metrics::server

#endif  // METRICS_SERVER_AUTH_AUTHENTICATOR_H_
