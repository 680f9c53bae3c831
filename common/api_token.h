// The secrets of API tokens: 256 random bits from OpenSSL's CSPRNG, written
// as "mtk_" and 64 hex digits (the prefix lets secret scanners and people
// recognise one), and their SHA-256, which is all the database keeps.
//
// Thread-safety: thread-safe (OpenSSL's RAND_bytes and SHA256 are).
#ifndef METRICS_COMMON_API_TOKEN_H_
#define METRICS_COMMON_API_TOKEN_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace metrics::common {

inline constexpr absl::string_view kApiTokenPrefix = "mtk_";

// A fresh token secret. INTERNAL if the CSPRNG fails (it never should).
absl::StatusOr<std::string> NewApiTokenSecret();

// True for text of a token's shape ("mtk_" and 64 lowercase hex digits):
// anything else is refused without a database look-up.
bool LooksLikeApiToken(absl::string_view text);

// The 32 bytes of SHA-256 of `secret`.
std::string ApiTokenHash(absl::string_view secret);

// Equality that takes the same time wherever the inputs differ.
bool ConstantTimeEquals(absl::string_view a, absl::string_view b);

}  // namespace metrics::common

#endif  // METRICS_COMMON_API_TOKEN_H_
