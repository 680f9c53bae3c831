#include "common/presented_credential.h"

namespace metrics::common {

std::string PresentedCredential(absl::string_view authorization,
                                absl::string_view allocation_token) {
  if (allocation_token.empty() || allocation_token == authorization) {
    return std::string(authorization);
  }
  if (authorization.empty()) return std::string(allocation_token);
  // Not of the Bearer form: fails as every unknown token does.
  return "two different credentials";
}

}  // namespace metrics::common
