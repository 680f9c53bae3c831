// The API tokens in PostgreSQL (table api_tokens, migration 0003): create
// (the secret is returned once and only its SHA-256 stored), list, revoke,
// and find by secret. metricsctl manages tokens with it; metricsd will check
// callers' tokens with it.
//
// Thread-safety: thread-safe (a pool of its own, two connections).
#ifndef METRICS_STORAGE_PG_PG_TOKEN_STORE_H_
#define METRICS_STORAGE_PG_PG_TOKEN_STORE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "storage/api_token.h"
#include "storage/pg/connection_pool.h"

namespace metrics::storage::pg {

struct CreatedToken {
  ApiToken token;
  std::string secret;  // shown once; never stored
};

class PgTokenStore {
 public:
  explicit PgTokenStore(std::string database_url);

  // ValidateTokenRequest's errors; NOT_FOUND for a reporter's unknown
  // trial.
  absl::StatusOr<CreatedToken> Create(const TokenRequest& request,
                                      absl::Time deadline);
  // Every token, newest first, revoked and expired ones included.
  absl::StatusOr<std::vector<ApiToken>> List(absl::Time deadline);
  // Revokes token `id`; revoking again keeps the first time. NOT_FOUND for
  // an unknown id.
  absl::StatusOr<ApiToken> Revoke(int64_t id, absl::Time deadline);
  // The token whose secret is `secret`, usable or not; NOT_FOUND for any
  // other text (without a look-up when it is not shaped like a token).
  absl::StatusOr<ApiToken> Find(absl::string_view secret, absl::Time deadline);

 private:
  ConnectionPool pool_;
};

}  // namespace metrics::storage::pg

#endif  // METRICS_STORAGE_PG_PG_TOKEN_STORE_H_
