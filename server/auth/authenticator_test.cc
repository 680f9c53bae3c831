// The authenticator on the real token table: the principal of a good
// token; one answer for every bad one; the cache's freshness, so that a
// revocation through another server's store is seen once `recheck` passed;
// expiry on every call; refusals remembered (look-ups counted) and
// forgotten when the token is created; the per-peer limit, which lets a
// known token through and ends after its period.
#include "server/auth/authenticator.h"

#include <atomic>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "common/retry_after.h"
#include "common/testing/status_matchers.h"
#include "common/testing/test_time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "storage/pg/pg_metric_store.h"
#include "storage/pg/pg_token_store.h"
#include "storage/pg/testing/pg_checks.h"
#include "tests/testing/test_database.h"

namespace metrics::server {
namespace {

using ::metrics::test_util::StatusIs;
using ::metrics::test_util::TestDatabase;
using storage::TokenRole;
using ::testing::HasSubstr;
using ::testing::Not;

using ::metrics::test_util::Deadline;

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

// The real store, counting its look-ups.
class CountingTokenStore : public storage::TokenStore {
 public:
  explicit CountingTokenStore(storage::TokenStore* real) : real_(real) {}
  absl::StatusOr<storage::CreatedToken> Create(
      const storage::TokenRequest& request, absl::Time deadline) override {
    return real_->Create(request, deadline);
  }
  absl::StatusOr<std::vector<storage::ApiToken>> List(
      absl::Time deadline) override {
    return real_->List(deadline);
  }
  absl::StatusOr<storage::ApiToken> Revoke(int64_t id,
                                           absl::Time deadline) override {
    return real_->Revoke(id, deadline);
  }
  absl::StatusOr<storage::ApiToken> Find(absl::string_view secret,
                                         absl::Time deadline) override {
    finds_.fetch_add(1);
    return real_->Find(secret, deadline);
  }
  int finds() const { return finds_.load(); }

 private:
  storage::TokenStore* const real_;
  std::atomic<int> finds_{0};
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
                       auth_->Authenticate("Bearer " + secret, "", Deadline()));
  EXPECT_EQ(p.role, TokenRole::kReporter);
  EXPECT_EQ(p.trial_id, 7);
  // The scheme is case-insensitive; the second call comes from the cache.
  std::optional<absl::StatusOr<Principal>> cached =
      auth_->FromCache("bearer  " + secret, "");
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
    absl::StatusOr<Principal> p = auth_->Authenticate(header, "", Deadline());
    EXPECT_THAT(p, StatusIs(absl::StatusCode::kUnauthenticated,
                            "a valid API token is required: send "
                            "\"authorization: Bearer <token>\""))
        << header;
    EXPECT_THAT(p.status().message(), Not(HasSubstr("mtk_")));
  }
  ASSERT_OK(auth_->Authenticate("Bearer " + good, "", Deadline()).status());
}

TEST_F(AuthenticatorTest, ARevocationElsewhereIsSeenOnceTheCacheIsStale) {
  const std::string secret = NewToken(TokenRole::kViewer, std::nullopt);
  const std::string header = "Bearer " + secret;
  ASSERT_OK(auth_->Authenticate(header, "", Deadline()).status());
  ASSERT_OK(other_store_->Revoke(1, Deadline()).status());
  // Within `recheck` the cached answer stands, without the database.
  clock_.Advance(absl::Seconds(3));
  EXPECT_OK(auth_->Authenticate(header, "", Deadline()).status());
  // Past it: read again, refused, on both paths.
  clock_.Advance(absl::Seconds(2));
  EXPECT_FALSE(auth_->FromCache(header, "").has_value());
  EXPECT_THAT(auth_->Authenticate(header, "", Deadline()),
              StatusIs(absl::StatusCode::kUnauthenticated));
  std::optional<absl::StatusOr<Principal>> cached = auth_->FromCache(header, "");
  ASSERT_TRUE(cached.has_value());
  EXPECT_THAT(*cached, StatusIs(absl::StatusCode::kUnauthenticated));
}

TEST_F(AuthenticatorTest, ExpiryIsCheckedOnEveryCall) {
  const std::string secret =
      NewToken(TokenRole::kViewer, std::nullopt, absl::Minutes(10));
  const std::string header = "Bearer " + secret;
  ASSERT_OK(auth_->Authenticate(header, "", Deadline()).status());
  clock_.Advance(absl::Minutes(11));
  // The cache entry is stale by now too; either way, refused.
  EXPECT_THAT(auth_->Authenticate(header, "", Deadline()),
              StatusIs(absl::StatusCode::kUnauthenticated));
}

TEST_F(AuthenticatorTest, AnUnreachableDatabaseIsNotAWrongToken) {
  const std::string secret = NewToken(TokenRole::kViewer, std::nullopt);
  storage::pg::PgTokenStore nowhere("postgresql://127.0.0.1:1/none");
  Authenticator auth(&nowhere, AuthenticatorOptions());
  absl::StatusOr<Principal> p =
      auth.Authenticate("Bearer " + secret, "", Deadline());
  EXPECT_EQ(p.status().code(), absl::StatusCode::kUnavailable) << p.status();
  EXPECT_THAT(p.status().message(), Not(HasSubstr(secret)));
}

// A token's shape that no token has (yet).
std::string UnknownSecret(int i) {
  return absl::StrCat("mtk_", std::string(56, 'a'), absl::Hex(i, absl::kZeroPad8));
}

class RefusalTest : public AuthenticatorTest {
 protected:
  void SetUp() override {
    AuthenticatorTest::SetUp();
    counting_ = std::make_unique<CountingTokenStore>(store_.get());
    AuthenticatorOptions auth;
    auth.clock = [this] { return clock_.Now(); };
    auth.max_refused = 100;
    auth.log = [this](absl::string_view line) {
      absl::MutexLock lock(&log_mu_);
      log_.emplace_back(line);
    };
    PeerLimiterOptions limit;
    limit.burst = 5;
    limit.refill = absl::Seconds(2);
    limit.clock = auth.clock;
    limiter_ = std::make_unique<PeerLimiter>(limit);
    counted_ = std::make_unique<Authenticator>(counting_.get(), auth,
                                               limiter_.get());
  }

  absl::StatusCode Code(const std::string& header, const std::string& peer) {
    return counted_->Authenticate(header, peer, Deadline()).status().code();
  }

  std::unique_ptr<CountingTokenStore> counting_;
  std::unique_ptr<PeerLimiter> limiter_;
  std::unique_ptr<Authenticator> counted_;
  absl::Mutex log_mu_;
  std::vector<std::string> log_ ABSL_GUARDED_BY(log_mu_);
};

TEST_F(RefusalTest, ARefusedTokenIsNotLookedUpAgainWithinItsLifetime) {
  const std::string unknown = "Bearer " + UnknownSecret(1);
  const std::string revoked =
      "Bearer " + NewToken(TokenRole::kViewer, std::nullopt);
  ASSERT_OK(other_store_->Revoke(1, Deadline()).status());
  for (int i = 0; i < 4; ++i) {
    // Each from its own address, so that no limit is what refuses them.
    EXPECT_EQ(Code(unknown, absl::StrCat("10.0.0.", i)),
              absl::StatusCode::kUnauthenticated);
    EXPECT_EQ(Code(revoked, absl::StrCat("10.0.1.", i)),
              absl::StatusCode::kUnauthenticated);
  }
  EXPECT_EQ(counting_->finds(), 2);
  // Not of a token's shape: refused without any look-up.
  EXPECT_EQ(Code("Bearer mtk_short", "10.0.2.1"),
            absl::StatusCode::kUnauthenticated);
  EXPECT_EQ(Code(std::string(10000, 'x'), "10.0.2.2"),
            absl::StatusCode::kUnauthenticated);
  EXPECT_EQ(counting_->finds(), 2);
  // Past the lifetime, looked up again.
  clock_.Advance(absl::Minutes(1) + absl::Seconds(1));
  EXPECT_EQ(Code(unknown, "10.0.3.1"), absl::StatusCode::kUnauthenticated);
  EXPECT_EQ(counting_->finds(), 3);
  EXPECT_EQ(counted_->refusals().unauthenticated, 11);
  EXPECT_EQ(counted_->refusals().limited, 0);
}

TEST_F(RefusalTest, ATokenCreatedAfterBeingRefusedWorksAtOnce) {
  // A secret presented before its token exists (a token imported with a
  // chosen secret, or one made by this server's CreateToken: Created is
  // called for both).
  const std::string secret = UnknownSecret(2);
  EXPECT_EQ(Code("Bearer " + secret, "10.0.0.1"),
            absl::StatusCode::kUnauthenticated);
  ASSERT_OK(storage::pg::test_util::QueryScalar(
                db_->url(),
                "INSERT INTO api_tokens (role, token_sha256) VALUES ('viewer', "
                "sha256(convert_to('" + secret + "', 'UTF8'))) RETURNING id")
                .status());
  // Without a word of the creation, the refusal stands for its lifetime...
  EXPECT_EQ(Code("Bearer " + secret, "10.0.0.1"),
            absl::StatusCode::kUnauthenticated);
  EXPECT_EQ(counting_->finds(), 1);
  // ...and with it, the token works at once.
  counted_->Created(secret);
  ASSERT_OK_AND_ASSIGN(Principal p, counted_->Authenticate("Bearer " + secret,
                                                           "10.0.0.1",
                                                           Deadline()));
  EXPECT_EQ(p.role, TokenRole::kViewer);
  EXPECT_EQ(counting_->finds(), 2);
}

TEST_F(RefusalTest, AFloodingPeerIsLimitedAndAKnownTokenStillPasses) {
  const std::string good = "Bearer " + NewToken(TokenRole::kViewer, std::nullopt);
  ASSERT_OK(counted_->Authenticate(good, "10.0.0.9", Deadline()).status());
  const int finds_before = counting_->finds();
  // The burst (5) is heard, then every attempt is limited: no look-up.
  for (int i = 0; i < 5; ++i) {
    EXPECT_EQ(Code("Bearer " + UnknownSecret(100 + i), "10.0.0.9"),
              absl::StatusCode::kUnauthenticated);
  }
  EXPECT_EQ(counting_->finds(), finds_before + 5);
  for (int i = 0; i < 20; ++i) {
    absl::StatusOr<Principal> p = counted_->Authenticate(
        "Bearer " + UnknownSecret(200 + i), "10.0.0.9", Deadline());
    EXPECT_THAT(p, StatusIs(absl::StatusCode::kResourceExhausted,
                            HasSubstr("too many failed authentications")));
    std::optional<absl::Duration> wait = common::RetryAfterOf(p.status());
    ASSERT_TRUE(wait.has_value());
    EXPECT_GT(*wait, absl::ZeroDuration());
    EXPECT_LE(*wait, absl::Seconds(2));
  }
  EXPECT_EQ(Code("", "10.0.0.9"), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(counting_->finds(), finds_before + 5);
  EXPECT_EQ(counted_->refusals().limited, 21);
  // A good client behind the same address is heard, from the cache and,
  // once stale, from the store.
  EXPECT_OK(counted_->Authenticate(good, "10.0.0.9", Deadline()).status());
  // Another address is not limited.
  EXPECT_EQ(Code("Bearer " + UnknownSecret(300), "10.0.0.10"),
            absl::StatusCode::kUnauthenticated);
  // One refill later, one attempt is heard again; the whole burst after 5.
  clock_.Advance(absl::Seconds(2));
  EXPECT_EQ(Code("Bearer " + UnknownSecret(301), "10.0.0.9"),
            absl::StatusCode::kUnauthenticated);
  EXPECT_EQ(Code("Bearer " + UnknownSecret(302), "10.0.0.9"),
            absl::StatusCode::kResourceExhausted);
  clock_.Advance(absl::Seconds(5));  // past recheck: the good token is stale
  EXPECT_OK(counted_->Authenticate(good, "10.0.0.9", Deadline()).status());
  // Said once per peer and period, without any token.
  absl::MutexLock lock(&log_mu_);
  ASSERT_EQ(log_.size(), 1u);
  EXPECT_THAT(log_[0], HasSubstr("peer 10.0.0.9 is limited"));
  EXPECT_THAT(log_[0], Not(HasSubstr("mtk_")));
}

TEST_F(RefusalTest, AFloodOfDistinctTokensPushesOutNoGoodOne) {
  const std::string good = "Bearer " + NewToken(TokenRole::kViewer, std::nullopt);
  ASSERT_OK(counted_->Authenticate(good, "10.0.0.1", Deadline()).status());
  const int finds_before = counting_->finds();
  for (int i = 0; i < 1000; ++i) {  // ten times the refused cache
    EXPECT_EQ(Code("Bearer " + UnknownSecret(1000 + i),
                   absl::StrCat("10.1.", i / 250, ".", i % 250)),
              absl::StatusCode::kUnauthenticated);
  }
  EXPECT_EQ(counting_->finds(), finds_before + 1000);
  // The good token is still cached: no look-up.
  EXPECT_OK(counted_->Authenticate(good, "10.0.0.1", Deadline()).status());
  EXPECT_EQ(counting_->finds(), finds_before + 1000);
}

}  // namespace
}  // namespace metrics::server
