// The API tokens' store, as MetricStore is the metrics': create (the secret
// is returned once and only its SHA-256 kept), list, revoke, and find by
// secret. metricsd's authenticator and TokenService and metricsctl use this
// interface; storage/pg/pg_token_store.h is its PostgreSQL implementation.
//
// Thread-safety: implementations are thread-safe.
#ifndef METRICS_STORAGE_TOKEN_STORE_H_
#define METRICS_STORAGE_TOKEN_STORE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "storage/api_token.h"

namespace metrics::storage {

struct CreatedToken {
  ApiToken token;
  std::string secret;  // shown once; never stored
};

class TokenStore {
 public:
  virtual ~TokenStore() = default;

  // ValidateTokenRequest's errors; NOT_FOUND for a reporter's unknown
  // trial.
  virtual absl::StatusOr<CreatedToken> Create(const TokenRequest& request,
                                              absl::Time deadline) = 0;
  // Every token, newest first, revoked and expired ones included.
  virtual absl::StatusOr<std::vector<ApiToken>> List(absl::Time deadline) = 0;
  // Revokes token `id`; revoking again keeps the first time. NOT_FOUND for
  // an unknown id.
  virtual absl::StatusOr<ApiToken> Revoke(int64_t id, absl::Time deadline) = 0;
  // The token whose secret is `secret`, usable or not; NOT_FOUND for any
  // other text (without a look-up when it is not shaped like a token).
  virtual absl::StatusOr<ApiToken> Find(absl::string_view secret,
                                        absl::Time deadline) = 0;
};

}  // namespace metrics::storage

#endif  // METRICS_STORAGE_TOKEN_STORE_H_
