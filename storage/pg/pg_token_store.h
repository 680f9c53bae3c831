// The API tokens in PostgreSQL (table api_tokens, migration 0003): the
// TokenStore (storage/token_store.h) that metricsd and metricsctl use.
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
#include "storage/token_store.h"

namespace metrics::storage::pg {

class PgTokenStore : public TokenStore {
 public:
  explicit PgTokenStore(std::string database_url);

  absl::StatusOr<CreatedToken> Create(const TokenRequest& request,
                                      absl::Time deadline) override;
  absl::StatusOr<std::vector<ApiToken>> List(absl::Time deadline) override;
  absl::StatusOr<ApiToken> Revoke(int64_t id, absl::Time deadline) override;
  absl::StatusOr<ApiToken> Find(absl::string_view secret,
                                absl::Time deadline) override;

 private:
  ConnectionPool pool_;
};

}  // namespace metrics::storage::pg

#endif  // METRICS_STORAGE_PG_PG_TOKEN_STORE_H_
