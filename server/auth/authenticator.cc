#include "server/auth/authenticator.h"

#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "common/api_token.h"

namespace metrics::server {

absl::Status Unauthenticated() {
  return absl::UnauthenticatedError(
      "a valid API token is required: send \"authorization: Bearer <token>\"");
}

Authenticator::Authenticator(storage::TokenStore* store,
                             AuthenticatorOptions options)
    : store_(store), options_(std::move(options)) {}

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

std::string Authenticator::KeyOf(absl::string_view authorization) {
  absl::string_view token = TokenOf(authorization);
  return token.empty() ? "" : common::ApiTokenHash(token);
}

absl::StatusOr<Principal> Authenticator::Judge(
    const std::optional<storage::ApiToken>& token) {
  if (!token.has_value() ||
      !storage::IsUsable(*token, absl::ToUnixMicros(options_.clock()))) {
    return Unauthenticated();
  }
  return Principal{token->id, token->role, token->trial_id};
}

std::optional<absl::StatusOr<Principal>> Authenticator::Cached(
    const std::string& key) {
  std::optional<storage::ApiToken> token;
  {
    absl::MutexLock lock(&mu_);
    auto it = cache_.find(key);
    if (it == cache_.end() ||
        options_.clock() - it->second.fetched > options_.recheck) {
      return std::nullopt;
    }
    token = it->second.token;
  }
  return Judge(token);
}

std::optional<absl::StatusOr<Principal>> Authenticator::FromCache(
    absl::string_view authorization) {
  const std::string key = KeyOf(authorization);
  if (key.empty()) return absl::StatusOr<Principal>(Unauthenticated());
  return Cached(key);
}

absl::StatusOr<Principal> Authenticator::Authenticate(
    absl::string_view authorization, absl::Time deadline) {
  const std::string key = KeyOf(authorization);
  if (key.empty()) return Unauthenticated();
  if (std::optional<absl::StatusOr<Principal>> cached = Cached(key)) {
    return *std::move(cached);
  }
  absl::StatusOr<storage::ApiToken> found =
      store_->Find(TokenOf(authorization), deadline);
  std::optional<storage::ApiToken> token;
  if (found.ok()) {
    token = *std::move(found);
  } else if (found.status().code() != absl::StatusCode::kNotFound) {
    return found.status();  // not cached: the store could not say
  }
  {
    absl::MutexLock lock(&mu_);
    if (cache_.size() >= options_.max_cached) cache_.clear();
    cache_[key] = Entry{token, options_.clock()};
  }
  return Judge(token);
}

}  // namespace metrics::server
