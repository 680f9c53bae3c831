#include "storage/api_token.h"

#include "absl/strings/str_cat.h"
#include "common/utf8.h"

namespace metrics::storage {

absl::string_view TokenRoleName(TokenRole role) {
  switch (role) {
    case TokenRole::kAdmin:
      return "admin";
    case TokenRole::kViewer:
      return "viewer";
    case TokenRole::kReporter:
      return "reporter";
  }
  return "viewer";
}

std::optional<TokenRole> ParseTokenRole(absl::string_view name) {
  for (TokenRole role :
       {TokenRole::kAdmin, TokenRole::kViewer, TokenRole::kReporter}) {
    if (name == TokenRoleName(role)) return role;
  }
  return std::nullopt;
}

bool IsUsable(const ApiToken& token, int64_t now_us) {
  return !token.revoked_at_us.has_value() &&
         (!token.expires_at_us.has_value() || now_us < *token.expires_at_us);
}

absl::Status ValidateTokenRequest(const TokenRequest& request) {
  const bool reporter = request.role == TokenRole::kReporter;
  if (reporter && !request.trial_id.has_value()) {
    return absl::InvalidArgumentError(
        "trial: a reporter token is bound to one trial; name it");
  }
  if (!reporter && request.trial_id.has_value()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "trial: only reporter tokens are bound to a trial; an ",
        TokenRoleName(request.role), " token reaches every trial"));
  }
  if (request.trial_id.has_value() && *request.trial_id <= 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "trial: ", *request.trial_id, " is not a trial id (must be > 0)"));
  }
  if (request.name.size() > kMaxTokenNameLength) {
    return absl::InvalidArgumentError(absl::StrCat(
        "name: ", request.name.size(), " characters is more than the limit of ",
        kMaxTokenNameLength));
  }
  if (!common::IsValidUtf8(request.name)) {
    return absl::InvalidArgumentError("name: must be valid UTF-8");
  }
  for (unsigned char c : request.name) {
    if (c < 0x20 || c == 0x7f) {
      return absl::InvalidArgumentError(
          "name: must not contain control characters");
    }
  }
  if (request.ttl.has_value() && *request.ttl <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError(
        absl::StrCat("ttl: ", absl::FormatDuration(*request.ttl),
                     " is not a positive duration"));
  }
  // Past this, PostgreSQL's timestamps overflow; no token needs longer.
  if (request.ttl.has_value() && *request.ttl > kMaxTokenTtl) {
    return absl::InvalidArgumentError(
        absl::StrCat("ttl: ", absl::FormatDuration(*request.ttl),
                     " is more than 100 years"));
  }
  return absl::OkStatus();
}

}  // namespace metrics::storage
