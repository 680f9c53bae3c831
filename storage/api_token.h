// API tokens as stored: who holds one (its role and, for a reporter, its
// trial), when it ends, and whether it was revoked. The secret itself is
// never stored (see common/api_token.h); storage/pg/pg_token_store.h keeps
// these in the api_tokens table.
//
// Thread-safety: plain values and pure functions.
#ifndef METRICS_STORAGE_API_TOKEN_H_
#define METRICS_STORAGE_API_TOKEN_H_

#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace metrics::storage {

// admin: everything, tokens included; viewer: every read; reporter: ingest
// into its one trial and reads of it.
enum class TokenRole { kAdmin, kViewer, kReporter };

absl::string_view TokenRoleName(TokenRole role);  // "admin", ...
std::optional<TokenRole> ParseTokenRole(absl::string_view name);

inline constexpr size_t kMaxTokenNameLength = 200;
inline constexpr absl::Duration kMaxTokenTtl = absl::Hours(24 * 365 * 100);

struct ApiToken {
  int64_t id = 0;
  std::string name;
  TokenRole role = TokenRole::kViewer;
  std::optional<int32_t> trial_id;  // set for reporters only
  int64_t created_at_us = 0;        // times: µs since the epoch
  std::optional<int64_t> expires_at_us;
  std::optional<int64_t> revoked_at_us;
};

// Neither revoked nor expired at `now_us`.
bool IsUsable(const ApiToken& token, int64_t now_us);

// What a new token is for.
struct TokenRequest {
  std::string name;
  TokenRole role = TokenRole::kViewer;
  std::optional<int32_t> trial_id;    // required for reporters, refused else
  std::optional<absl::Duration> ttl;  // unset: never expires
};

// INVALID_ARGUMENT naming the field: a reporter without a trial, a trial
// on another role, a trial id not above 0, a name over 200 bytes, not
// UTF-8 or with control characters, a ttl not above zero or over 100 years.
absl::Status ValidateTokenRequest(const TokenRequest& request);

}  // namespace metrics::storage

#endif  // METRICS_STORAGE_API_TOKEN_H_
