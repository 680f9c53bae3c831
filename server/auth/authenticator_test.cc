// The authenticator on the real token table: the principal of a good
// token; one answer for every bad one; the cache's freshness, so that a
// revocation through another server's store is seen once `recheck` passed;
// expiry on every call.
#include "server/auth/authenticator.h"

#include "absl/synchronization/mutex.h"
#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "storage/pg/pg_metric_store.h"
#include "storage/pg/pg_token_store.h"
#include "tests/testing/test_database.h"

namespace metrics::server {
namespace {

using ::metrics::test_util::StatusIs;
using ::metrics::test_util::TestDatabase;
using storage::TokenRole;
using ::testing::HasSubstr;
using ::testing::Not;

absl::Time Deadline() { return absl::Now() + absl::Seconds(30); }

// A clock the test moves.
class FakeClock {
 public:
  absl::Time Now() {
    absl::MutexLock lock(&mu_);
    return now_;
  }
  void Advance(absl::Duration d) {
    absl::MutexLock lock(&mu_);
    now_ += d;
  }

 private:
  absl::Mutex mu_;
  absl::Time now_ = absl::Now();
};

class AuthenticatorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_OK_AND_ASSIGN(db_, TestDatabase::Create());
    storage::pg::PgMetricStoreOptions options;
    options.database_url = db_->url();
    ASSERT_OK(storage::pg::PgMetricStore::Create(options)->CreateTrial(
        7, Deadline()));
    store_ = std::make_unique<storage::pg::PgTokenStore>(db_->url());
    other_store_ = std::make_unique<storage::pg::PgTokenStore>(db_->url());
    AuthenticatorOptions auth;
    auth.clock = [this] { return clock_.Now(); };
    auth_ = std::make_unique<Authenticator>(store_.get(), auth);
  }

  std::string NewToken(TokenRole role, std::optional<int32_t> trial,
                       std::optional<absl::Duration> ttl = std::nullopt) {
    storage::TokenRequest request;
    request.role = role;
    request.trial_id = trial;
    request.ttl = ttl;
    auto created = other_store_->Create(request, Deadline());
    EXPECT_TRUE(created.ok()) << created.status();
    return created.ok() ? created->secret : "";
  }

  std::unique_ptr<TestDatabase> db_;
  std::unique_ptr<storage::pg::PgTokenStore> store_;
  std::unique_ptr<storage::pg::PgTokenStore> other_store_;  // "another server"
  FakeClock clock_;
  std::unique_ptr<Authenticator> auth_;
};

TEST_F(AuthenticatorTest, AGoodTokenGivesItsPrincipal) {
  const std::string secret = NewToken(TokenRole::kReporter, 7);
  ASSERT_OK_AND_ASSIGN(Principal p,
                       auth_->Authenticate("Bearer " + secret, Deadline()));
  EXPECT_EQ(p.role, TokenRole::kReporter);
  EXPECT_EQ(p.trial_id, 7);
  // The scheme is case-insensitive; the second call comes from the cache.
  std::optional<absl::StatusOr<Principal>> cached =
      auth_->FromCache("bearer  " + secret);
  ASSERT_TRUE(cached.has_value());
  ASSERT_OK(cached->status());
  EXPECT_EQ((*cached)->token_id, p.token_id);
}

TEST_F(AuthenticatorTest, EveryBadCredentialGetsTheSameAnswer) {
  const std::string revoked = NewToken(TokenRole::kViewer, std::nullopt);
  ASSERT_OK(other_store_->Revoke(1, Deadline()).status());
  const std::string expired =
      NewToken(TokenRole::kViewer, std::nullopt, absl::Seconds(1));
  clock_.Advance(absl::Seconds(5));
  const std::string good = NewToken(TokenRole::kAdmin, std::nullopt);
  std::string unknown = good;
  unknown.back() = unknown.back() == '0' ? '1' : '0';
  for (const std::string& header :
       {std::string(), std::string("Bearer"), std::string("Bearer "),
        "Basic " + good, good, "Bearer " + unknown, "Bearer " + revoked,
        "Bearer " + expired, "Bearer " + good + "x",
        std::string("Bearer x' OR '1'='1")}) {
    absl::StatusOr<Principal> p = auth_->Authenticate(header, Deadline());
    EXPECT_THAT(p, StatusIs(absl::StatusCode::kUnauthenticated,
                            "a valid API token is required: send "
                            "\"authorization: Bearer <token>\""))
        << header;
    EXPECT_THAT(p.status().message(), Not(HasSubstr("mtk_")));
  }
  ASSERT_OK(auth_->Authenticate("Bearer " + good, Deadline()).status());
}

TEST_F(AuthenticatorTest, ARevocationElsewhereIsSeenOnceTheCacheIsStale) {
  const std::string secret = NewToken(TokenRole::kViewer, std::nullopt);
  const std::string header = "Bearer " + secret;
  ASSERT_OK(auth_->Authenticate(header, Deadline()).status());
  ASSERT_OK(other_store_->Revoke(1, Deadline()).status());
  // Within `recheck` the cached answer stands, without the database.
  clock_.Advance(absl::Seconds(3));
  EXPECT_OK(auth_->Authenticate(header, Deadline()).status());
  // Past it: read again, refused, on both paths.
  clock_.Advance(absl::Seconds(2));
  EXPECT_FALSE(auth_->FromCache(header).has_value());
  EXPECT_THAT(auth_->Authenticate(header, Deadline()),
              StatusIs(absl::StatusCode::kUnauthenticated));
  std::optional<absl::StatusOr<Principal>> cached = auth_->FromCache(header);
  ASSERT_TRUE(cached.has_value());
  EXPECT_THAT(*cached, StatusIs(absl::StatusCode::kUnauthenticated));
}

TEST_F(AuthenticatorTest, ExpiryIsCheckedOnEveryCall) {
  const std::string secret =
      NewToken(TokenRole::kViewer, std::nullopt, absl::Minutes(10));
  const std::string header = "Bearer " + secret;
  ASSERT_OK(auth_->Authenticate(header, Deadline()).status());
  clock_.Advance(absl::Minutes(11));
  // The cache entry is stale by now too; either way, refused.
  EXPECT_THAT(auth_->Authenticate(header, Deadline()),
              StatusIs(absl::StatusCode::kUnauthenticated));
}

TEST_F(AuthenticatorTest, AnUnreachableDatabaseIsNotAWrongToken) {
  const std::string secret = NewToken(TokenRole::kViewer, std::nullopt);
  storage::pg::PgTokenStore nowhere("postgresql://127.0.0.1:1/none");
  Authenticator auth(&nowhere, AuthenticatorOptions());
  absl::StatusOr<Principal> p =
      auth.Authenticate("Bearer " + secret, Deadline());
  EXPECT_EQ(p.status().code(), absl::StatusCode::kUnavailable) << p.status();
  EXPECT_THAT(p.status().message(), Not(HasSubstr(secret)));
}

}  // namespace
}  // namespace metrics::server
