// Turns an "authorization: Bearer <token>" value into the caller's
// Principal. Answers come from a bounded cache while fresh (at most
// `recheck` old), so a stream or a busy client costs no database query per
// call, and a revoked token stops working within `recheck` on every
// metricsd of the database. Expiry is checked on every call. Unknown tokens
// are cached too, so repeating a wrong token does not reach the database.
//
// Every failure to authenticate (no header, not a Bearer token, a token
// unknown, expired or revoked) is the same UNAUTHENTICATED message, which
// never says which, nor quotes the token.
//
// Thread-safety: thread-safe.
#ifndef METRICS_SERVER_AUTH_AUTHENTICATOR_H_
#define METRICS_SERVER_AUTH_AUTHENTICATOR_H_

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
#include "storage/token_store.h"

namespace metrics::server {

struct AuthenticatorOptions {
  // How old a cached answer may be; revocation takes effect within it.
  absl::Duration recheck = absl::Seconds(4);
  // Cached answers at most (about 150 bytes each); the cache is cleared
  // when full.
  size_t max_cached = 100000;
  std::function<absl::Time()> clock = [] { return absl::Now(); };
};

class Authenticator {
 public:
  // `store` must outlive the authenticator.
  Authenticator(storage::TokenStore* store, AuthenticatorOptions options);

  // The caller of `authorization` (the header's value; empty when absent).
  // May query the store: call it where blocking is allowed. UNAUTHENTICATED
  // as above; the store's own errors (UNAVAILABLE, ...) when it cannot say.
  absl::StatusOr<Principal> Authenticate(absl::string_view authorization,
                                         absl::Time deadline)
      ABSL_LOCKS_EXCLUDED(mu_);

  // As Authenticate, from the cache only; nullopt when the cache holds no
  // fresh answer. Never blocks on the database (for reactor threads).
  std::optional<absl::StatusOr<Principal>> FromCache(
      absl::string_view authorization) ABSL_LOCKS_EXCLUDED(mu_);

 private:
  struct Entry {
    std::optional<storage::ApiToken> token;  // nullopt: no such token
    absl::Time fetched;
  };

  // The cache key of a header value: the SHA-256 of its token, or "" when
  // it carries no token.
  static std::string KeyOf(absl::string_view authorization);
  absl::StatusOr<Principal> Judge(
      const std::optional<storage::ApiToken>& token);
  std::optional<absl::StatusOr<Principal>> Cached(const std::string& key)
      ABSL_LOCKS_EXCLUDED(mu_);

  storage::TokenStore* const store_;
  const AuthenticatorOptions options_;
  absl::Mutex mu_;
  absl::flat_hash_map<std::string, Entry> cache_ ABSL_GUARDED_BY(mu_);
};

// The one answer to every caller that did not authenticate.
absl::Status Unauthenticated();

}  // namespace metrics::server

#endif  // METRICS_SERVER_AUTH_AUTHENTICATOR_H_
