#include "storage/pg/pg_token_store.h"

#include <pqxx/result>
#include <pqxx/transaction>
#include <utility>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "common/api_token.h"
#include "common/status_macros.h"
#include "storage/pg/pooled_transaction.h"
#include "storage/pg/sql_time.h"

namespace metrics::storage::pg {

namespace {

// The columns TokenFromRow maps.
std::string TokenColumnsSql() {
  return absl::StrCat(
      "id, name, role, trial_id, ", EpochMicrosSql("created_at"), ", ",
      EpochMicrosSql("expires_at"), ", ", EpochMicrosSql("revoked_at"),
      ", encode(token_sha256, 'hex')");
}

ApiToken TokenFromRow(const pqxx::row& row) {
  ApiToken token;
  token.id = row[0].as<int64_t>();
  token.name = row[1].as<std::string>();
  // The table's CHECK admits only the roles' names.
  token.role =
      ParseTokenRole(row[2].as<std::string>()).value_or(TokenRole::kViewer);
  if (!row[3].is_null()) token.trial_id = row[3].as<int32_t>();
  token.created_at_us = row[4].as<int64_t>();
  if (!row[5].is_null()) token.expires_at_us = row[5].as<int64_t>();
  if (!row[6].is_null()) token.revoked_at_us = row[6].as<int64_t>();
  return token;
}

// bytea's text input form of `bytes`.
std::string ByteaText(absl::string_view bytes) {
  return absl::StrCat("\\x", absl::BytesToHexString(bytes));
}

absl::Status UnknownToken() { return absl::NotFoundError("no such token"); }

}  // namespace

PgTokenStore::PgTokenStore(std::string database_url)
    : pool_(ConnectionPoolOptions{
          std::move(database_url), "metricsd-tokens", 2, {},
          KeyedAccessSettings()}) {}

absl::StatusOr<CreatedToken> PgTokenStore::Create(const TokenRequest& request,
                                                  absl::Time deadline) {
  RETURN_IF_ERROR(ValidateTokenRequest(request));
  ASSIGN_OR_RETURN(std::string secret, common::NewApiTokenSecret());
  std::optional<int64_t> ttl_us;
  if (request.ttl) ttl_us = absl::ToInt64Microseconds(*request.ttl);
  return Write<CreatedToken>(
      pool_, absl::StrCat("creating a ", TokenRoleName(request.role), " token"),
      deadline,
      [&](pqxx::transaction_base& tx) -> absl::StatusOr<CreatedToken> {
        if (request.trial_id.has_value() &&
            tx.exec_params("SELECT 1 FROM trials WHERE id = $1",
                           *request.trial_id)
                .empty()) {
          return absl::NotFoundError(absl::StrCat(
              "trial: trial ", *request.trial_id, " does not exist"));
        }
        pqxx::result r = tx.exec_params(
            absl::StrCat("INSERT INTO api_tokens (name, role, trial_id, "
                         "token_sha256, expires_at) VALUES ($1, $2, $3, "
                         "$4::bytea, now() + $5 * interval '1 microsecond') "
                         "RETURNING ",
                         TokenColumnsSql()),
            request.name, std::string(TokenRoleName(request.role)),
            request.trial_id, ByteaText(common::ApiTokenHash(secret)), ttl_us);
        return CreatedToken{TokenFromRow(r[0]), secret};
      });
}

absl::StatusOr<std::vector<ApiToken>> PgTokenStore::List(absl::Time deadline) {
  return Read<std::vector<ApiToken>>(
      pool_, "listing tokens", deadline,
      [&](pqxx::transaction_base& tx) -> absl::StatusOr<std::vector<ApiToken>> {
        std::vector<ApiToken> tokens;
        for (const pqxx::row& row :
             tx.exec(absl::StrCat("SELECT ", TokenColumnsSql(),
                                  " FROM api_tokens ORDER BY id DESC"))) {
          tokens.push_back(TokenFromRow(row));
        }
        return tokens;
      });
}

absl::StatusOr<ApiToken> PgTokenStore::Revoke(int64_t id, absl::Time deadline) {
  return Write<ApiToken>(
      pool_, absl::StrCat("revoking token ", id), deadline,
      [&](pqxx::transaction_base& tx) -> absl::StatusOr<ApiToken> {
        pqxx::result r = tx.exec_params(
            absl::StrCat("UPDATE api_tokens SET revoked_at = "
                         "coalesce(revoked_at, now()) WHERE id = $1 RETURNING ",
                         TokenColumnsSql()),
            id);
        if (r.empty()) {
          return absl::NotFoundError(
              absl::StrCat("token ", id, " does not exist"));
        }
        return TokenFromRow(r[0]);
      });
}

absl::StatusOr<ApiToken> PgTokenStore::Find(absl::string_view secret,
                                            absl::Time deadline) {
  if (!common::LooksLikeApiToken(secret)) return UnknownToken();
  const std::string hash = common::ApiTokenHash(secret);
  return Read<ApiToken>(
      pool_, "checking a token", deadline,
      [&](pqxx::transaction_base& tx) -> absl::StatusOr<ApiToken> {
        pqxx::result r = tx.exec_params(
            absl::StrCat("SELECT ", TokenColumnsSql(),
                         " FROM api_tokens WHERE token_sha256 = $1::bytea"),
            ByteaText(hash));
        // The index found it by hash; the comparison of what came back does
        // not leak, through its time, how much of the hash matched.
        if (r.empty() ||
            !common::ConstantTimeEquals(r[0][7].as<std::string>(),
                                        absl::BytesToHexString(hash))) {
          return UnknownToken();
        }
        return TokenFromRow(r[0]);
      });
}

}  // namespace metrics::storage::pg
