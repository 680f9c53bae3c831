#include "common/api_token.h"

#include <openssl/crypto.h>
#include <openssl/rand.h>
#include <openssl/sha.h>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"

namespace metrics::common {

namespace {
constexpr int kSecretBytes = 32;  // 256 bits
}  // namespace

absl::StatusOr<std::string> NewApiTokenSecret() {
  unsigned char bytes[kSecretBytes];
  if (RAND_bytes(bytes, sizeof(bytes)) != 1) {
    return absl::InternalError("the random number generator failed");
  }
  return absl::StrCat(kApiTokenPrefix, absl::BytesToHexString(absl::string_view(
                                           reinterpret_cast<const char*>(bytes),
                                           sizeof(bytes))));
}

bool LooksLikeApiToken(absl::string_view text) {
  if (text.size() != kApiTokenPrefix.size() + 2 * kSecretBytes ||
      text.substr(0, kApiTokenPrefix.size()) != kApiTokenPrefix) {
    return false;
  }
  for (char c : text.substr(kApiTokenPrefix.size())) {
    if (!absl::ascii_isdigit(c) && (c < 'a' || c > 'f')) return false;
  }
  return true;
}

std::string ApiTokenHash(absl::string_view secret) {
  unsigned char digest[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(secret.data()), secret.size(),
         digest);
  return std::string(reinterpret_cast<const char*>(digest), sizeof(digest));
}

bool ConstantTimeEquals(absl::string_view a, absl::string_view b) {
  return a.size() == b.size() &&
         CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

}  // namespace metrics::common
