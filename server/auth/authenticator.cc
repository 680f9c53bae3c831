#include "server/auth/authenticator.h"

#include <algorithm>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/cord.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/api_token.h"
#include "common/retry_after.h"

namespace metrics::server {

namespace {

// The token of a header value, or "" when it carries none of a token's
// shape. RFC 9110: the scheme is case-insensitive; spaces follow it.
absl::string_view TokenOf(absl::string_view authorization) {
  constexpr absl::string_view kScheme = "bearer ";
  if (authorization.size() <= kScheme.size() ||
      !absl::StartsWithIgnoreCase(authorization, kScheme)) {
    return "";
  }
  absl::string_view token =
      absl::StripAsciiWhitespace(authorization.substr(kScheme.size()));
  return common::LooksLikeApiToken(token) ? token : "";
}

}  // namespace

absl::Status Unauthenticated() {
  return absl::UnauthenticatedError(
      "a valid API token is required: send \"authorization: Bearer <token>\"");
}

absl::Status PeerLimited(absl::Duration wait) {
  const int64_t ms = std::max<int64_t>(1, absl::ToInt64Milliseconds(
                                              absl::Ceil(wait, absl::Milliseconds(1))));
  return common::WithRetryAfter(
      absl::ResourceExhaustedError(absl::StrCat(
          "too many failed authentications from this address; retry in ",
          absl::FormatDuration(absl::Milliseconds(ms)))),
      absl::Milliseconds(ms));
}

Authenticator::Authenticator(storage::TokenStore* store,
                             AuthenticatorOptions options, PeerLimiter* limiter)
    : store_(store), options_(std::move(options)), limiter_(limiter) {}

std::string Authenticator::KeyOf(absl::string_view authorization) {
  absl::string_view token = TokenOf(authorization);
  return token.empty() ? "" : common::ApiTokenHash(token);
}

absl::StatusOr<Principal> Authenticator::Judge(
    const storage::ApiToken& token) const {
  if (!storage::IsUsable(token, absl::ToUnixMicros(options_.clock()))) {
    return Unauthenticated();
  }
  return Principal{token.id, token.role, token.trial_id};
}

absl::Status Authenticator::Refuse(absl::string_view peer) {
  unauthenticated_.fetch_add(1, std::memory_order_relaxed);
  if (limiter_ != nullptr && !peer.empty() && limiter_->Failed(peer) &&
      options_.log) {
    options_.log(absl::StrCat(
        "authentication: peer ", PeerLimiter::KeyOf(peer),
        " is limited after repeated failed authentications; its attempts "
        "without a known token are refused (429 / RESOURCE_EXHAUSTED)"));
  }
  return Unauthenticated();
}

bool Authenticator::RefusedLocked(const std::string& key,
                                  absl::Time now) const {
  for (const auto* generation : {&refused_, &refused_older_}) {
    auto it = generation->find(key);
    if (it != generation->end() && now - it->second < options_.refused_lifetime) {
      return true;
    }
  }
  return false;
}

void Authenticator::RememberRefusalLocked(const std::string& key,
                                          absl::Time now) {
  if (refused_.size() >= std::max<size_t>(1, options_.max_refused / 2)) {
    refused_older_ = std::move(refused_);
    refused_.clear();
  }
  refused_[key] = now;
}

std::optional<absl::StatusOr<Principal>> Authenticator::FromCaches(
    const std::string& key, absl::string_view peer) {
  const absl::Time now = options_.clock();
  std::optional<storage::ApiToken> fresh;
  bool known = false;  // a usable token as last read, fresh or not
  bool refused = false;
  {
    absl::MutexLock lock(&mu_);
    if (!key.empty()) {
      if (auto it = usable_.find(key); it != usable_.end()) {
        known = true;
        if (now - it->second.fetched <= options_.recheck) {
          fresh = it->second.token;
        }
      } else {
        refused = RefusedLocked(key, now);
      }
    }
  }
  // A limited peer is heard only with a token known to be usable.
  if (!known && limiter_ != nullptr && !peer.empty()) {
    if (absl::Duration wait = limiter_->Wait(peer); wait > absl::ZeroDuration()) {
      limited_.fetch_add(1, std::memory_order_relaxed);
      return absl::StatusOr<Principal>(PeerLimited(wait));
    }
  }
  if (key.empty() || refused) return absl::StatusOr<Principal>(Refuse(peer));
  if (!fresh) return std::nullopt;
  absl::StatusOr<Principal> judged = Judge(*fresh);
  if (!judged.ok()) {
    {
      absl::MutexLock lock(&mu_);
      usable_.erase(key);
      RememberRefusalLocked(key, now);
    }
    return absl::StatusOr<Principal>(Refuse(peer));
  }
  return judged;
}

std::optional<absl::StatusOr<Principal>> Authenticator::FromCache(
    absl::string_view authorization, absl::string_view peer) {
  return FromCaches(KeyOf(authorization), peer);
}

absl::StatusOr<Principal> Authenticator::Authenticate(
    absl::string_view authorization, absl::string_view peer,
    absl::Time deadline) {
  const std::string key = KeyOf(authorization);
  if (std::optional<absl::StatusOr<Principal>> cached = FromCaches(key, peer)) {
    return *std::move(cached);
  }
  absl::StatusOr<storage::ApiToken> found =
      store_->Find(TokenOf(authorization), deadline);
  if (!found.ok() && found.status().code() != absl::StatusCode::kNotFound) {
    return found.status();  // not cached: the store could not say
  }
  const absl::Time now = options_.clock();
  absl::StatusOr<Principal> judged =
      found.ok() ? Judge(*found) : absl::StatusOr<Principal>(Unauthenticated());
  {
    absl::MutexLock lock(&mu_);
    if (judged.ok()) {
      if (usable_.size() >= options_.max_cached) usable_.clear();
      usable_[key] = Entry{*std::move(found), now};
    } else {
      // Unknown, revoked or expired: none becomes usable later (a secret is
      // drawn when its token is made, and Created forgets it here).
      usable_.erase(key);
      RememberRefusalLocked(key, now);
    }
  }
  if (!judged.ok()) return Refuse(peer);
  return judged;
}

void Authenticator::Created(absl::string_view secret) {
  if (!common::LooksLikeApiToken(secret)) return;
  const std::string key = common::ApiTokenHash(secret);
  absl::MutexLock lock(&mu_);
  refused_.erase(key);
  refused_older_.erase(key);
}

AuthRefusals Authenticator::refusals() const {
  return AuthRefusals{unauthenticated_.load(std::memory_order_relaxed),
                      limited_.load(std::memory_order_relaxed)};
}

}  // namespace metrics::server
