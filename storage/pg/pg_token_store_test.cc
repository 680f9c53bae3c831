// API tokens in the real database: created tokens are found by their
// secret and by nothing else, revocation and expiry are recorded, only the
// hash is stored; and `metricsctl tokens` as an operator runs it.
#include "storage/pg/pg_token_store.h"

#include "absl/strings/escaping.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "common/api_token.h"
#include "common/subprocess.h"
#include "common/testing/status_matchers.h"
#include "common/testing/test_time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "storage/pg/pg_metric_store.h"
#include "storage/pg/testing/pg_checks.h"
#include "tests/testing/test_database.h"

namespace metrics::storage::pg {
namespace {

using ::metrics::test_util::StatusIs;
using ::metrics::common::Subprocess;
using ::metrics::test_util::TestDatabase;
using ::testing::HasSubstr;
using ::testing::Not;

using ::metrics::test_util::Deadline;

class PgTokenStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_OK_AND_ASSIGN(db_, TestDatabase::Create());
    PgMetricStoreOptions options;
    options.database_url = db_->url();
    auto trials = PgMetricStore::Create(options);
    ASSERT_OK(trials->CreateTrial(7, Deadline()));
    tokens_ = std::make_unique<PgTokenStore>(db_->url());
  }

  // Runs metricsctl with `args` on the test database.
  std::unique_ptr<Subprocess> Ctl(std::vector<std::string> args) {
    args.insert(args.begin(), METRICSCTL_PATH);
    auto run = Subprocess::Start(args, {"DATABASE_URL=" + db_->url()});
    EXPECT_TRUE(run.ok()) << run.status();
    if (!run.ok()) return nullptr;
    auto code = (*run)->Wait(absl::Seconds(60));
    EXPECT_TRUE(code.ok()) << code.status();
    code_ = code.value_or(-1);
    return *std::move(run);
  }

  std::unique_ptr<TestDatabase> db_;
  std::unique_ptr<PgTokenStore> tokens_;
  int code_ = -1;
};

TEST_F(PgTokenStoreTest, ACreatedTokenIsFoundByItsSecretOnly) {
  TokenRequest request;
  request.name = "trial 7 agents";
  request.role = TokenRole::kReporter;
  request.trial_id = 7;
  ASSERT_OK_AND_ASSIGN(CreatedToken created,
                       tokens_->Create(request, Deadline()));
  EXPECT_TRUE(common::LooksLikeApiToken(created.secret));
  EXPECT_EQ(created.token.role, TokenRole::kReporter);
  EXPECT_EQ(created.token.trial_id, 7);
  EXPECT_EQ(created.token.name, "trial 7 agents");
  EXPECT_FALSE(created.token.expires_at_us.has_value());
  EXPECT_TRUE(IsUsable(created.token, absl::ToUnixMicros(absl::Now())));

  ASSERT_OK_AND_ASSIGN(ApiToken found,
                       tokens_->Find(created.secret, Deadline()));
  EXPECT_EQ(found.id, created.token.id);
  EXPECT_EQ(found.trial_id, 7);

  // One character off, another well-formed token, or any other text.
  std::string off = created.secret;
  off.back() = off.back() == 'a' ? 'b' : 'a';
  EXPECT_THAT(tokens_->Find(off, Deadline()),
              StatusIs(absl::StatusCode::kNotFound, "no such token"));
  ASSERT_OK_AND_ASSIGN(std::string other, common::NewApiTokenSecret());
  EXPECT_THAT(tokens_->Find(other, Deadline()),
              StatusIs(absl::StatusCode::kNotFound, "no such token"));
  EXPECT_THAT(tokens_->Find("Bearer x' OR 1=1 --", Deadline()),
              StatusIs(absl::StatusCode::kNotFound, "no such token"));

  // The database holds the hash, never the secret.
  ASSERT_OK_AND_ASSIGN(
      std::string stored,
      test_util::QueryScalar(db_->url(),
                             "SELECT encode(token_sha256, 'hex') || "
                             "name || role FROM api_tokens"));
  EXPECT_THAT(
      stored,
      HasSubstr(absl::BytesToHexString(common::ApiTokenHash(created.secret))));
  EXPECT_THAT(stored, Not(HasSubstr(created.secret.substr(4))));
}

TEST_F(PgTokenStoreTest, RevokedAndExpiredTokensAreFoundButNotUsable) {
  TokenRequest viewer;
  viewer.role = TokenRole::kViewer;
  ASSERT_OK_AND_ASSIGN(CreatedToken a, tokens_->Create(viewer, Deadline()));
  ASSERT_OK_AND_ASSIGN(ApiToken revoked,
                       tokens_->Revoke(a.token.id, Deadline()));
  ASSERT_TRUE(revoked.revoked_at_us.has_value());
  // Revoking again keeps the first time.
  ASSERT_OK_AND_ASSIGN(ApiToken again, tokens_->Revoke(a.token.id, Deadline()));
  EXPECT_EQ(again.revoked_at_us, revoked.revoked_at_us);
  ASSERT_OK_AND_ASSIGN(ApiToken found, tokens_->Find(a.secret, Deadline()));
  EXPECT_FALSE(IsUsable(found, absl::ToUnixMicros(absl::Now())));
  EXPECT_THAT(
      tokens_->Revoke(999, Deadline()),
      StatusIs(absl::StatusCode::kNotFound, "token 999 does not exist"));

  viewer.ttl = absl::Hours(1);
  ASSERT_OK_AND_ASSIGN(CreatedToken b, tokens_->Create(viewer, Deadline()));
  ASSERT_TRUE(b.token.expires_at_us.has_value());
  EXPECT_NEAR(*b.token.expires_at_us - b.token.created_at_us, 3600e6, 1e6);
  EXPECT_TRUE(IsUsable(b.token, b.token.created_at_us));
  EXPECT_FALSE(IsUsable(b.token, *b.token.expires_at_us));

  ASSERT_OK_AND_ASSIGN(std::vector<ApiToken> all, tokens_->List(Deadline()));
  ASSERT_EQ(all.size(), 2u);
  EXPECT_EQ(all[0].id, b.token.id);  // newest first
}

TEST_F(PgTokenStoreTest, BadRequestsNameTheField) {
  TokenRequest r;
  r.role = TokenRole::kReporter;
  EXPECT_THAT(
      tokens_->Create(r, Deadline()),
      StatusIs(absl::StatusCode::kInvalidArgument,
               HasSubstr("trial: a reporter token is bound to one trial")));
  r.trial_id = 404;
  EXPECT_THAT(
      tokens_->Create(r, Deadline()),
      StatusIs(absl::StatusCode::kNotFound, "trial: trial 404 does not exist"));
  r.role = TokenRole::kAdmin;
  r.trial_id = 7;
  EXPECT_THAT(tokens_->Create(r, Deadline()),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("trial: only reporter tokens")));
  r.trial_id.reset();
  r.ttl = absl::ZeroDuration();
  EXPECT_THAT(
      tokens_->Create(r, Deadline()),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("ttl: 0")));
  r.ttl = absl::Hours(24 * 365 * 200);
  EXPECT_THAT(tokens_->Create(r, Deadline()),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("is more than 100 years")));
  r.ttl.reset();
  r.name = "caf\xc3";
  EXPECT_THAT(tokens_->Create(r, Deadline()),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "name: must be valid UTF-8"));
  r.name = "a\nb";
  EXPECT_THAT(tokens_->Create(r, Deadline()),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("name: must not contain control characters")));
  ASSERT_OK_AND_ASSIGN(std::vector<ApiToken> none, tokens_->List(Deadline()));
  EXPECT_TRUE(none.empty());
}

TEST_F(PgTokenStoreTest, MetricsctlCreatesListsAndRevokes) {
  auto create = Ctl({"tokens", "create", "--role=reporter", "--trial=7",
                     "--ttl=90d", "--name=agents of 7"});
  ASSERT_NE(create, nullptr);
  ASSERT_EQ(code_, 0) << create->stderr_text();
  std::vector<std::string> lines =
      absl::StrSplit(create->stdout_text(), '\n', absl::SkipEmpty());
  ASSERT_FALSE(lines.empty());
  const std::string secret = lines.back();
  EXPECT_TRUE(common::LooksLikeApiToken(secret)) << create->stdout_text();
  EXPECT_THAT(create->stderr_text(),
              HasSubstr("created reporter token 1 \"agents of 7\" for trial 7, "
                        "expires "));
  EXPECT_THAT(create->stderr_text(), Not(HasSubstr(secret)));
  ASSERT_OK_AND_ASSIGN(ApiToken found, tokens_->Find(secret, Deadline()));
  EXPECT_EQ(found.trial_id, 7);

  auto list = Ctl({"tokens", "list"});
  ASSERT_NE(list, nullptr);
  ASSERT_EQ(code_, 0) << list->stderr_text();
  EXPECT_THAT(list->stdout_text(), HasSubstr("agents of 7"));
  EXPECT_THAT(list->stdout_text(), HasSubstr("reporter 7 "));
  EXPECT_THAT(list->stdout_text(), HasSubstr("active"));
  EXPECT_THAT(list->stdout_text(), Not(HasSubstr(secret)));

  auto revoke = Ctl({"tokens", "revoke", "1"});
  ASSERT_NE(revoke, nullptr);
  ASSERT_EQ(code_, 0) << revoke->stderr_text();
  EXPECT_THAT(revoke->stdout_text(), HasSubstr("revoked reporter token 1"));
  list = Ctl({"tokens", "list"});
  ASSERT_NE(list, nullptr);
  EXPECT_THAT(list->stdout_text(), HasSubstr("revoked"));
  EXPECT_THAT(list->stdout_text(), HasSubstr("1 token(s)"));
}

TEST_F(PgTokenStoreTest, MetricsctlRefusesBadUsage) {
  struct Case {
    std::vector<std::string> args;
    int code;
    std::string message;
  };
  const std::vector<Case> cases = {
      {{"tokens", "create"}, 2, "tokens create needs --role"},
      {{"tokens", "create", "--role=root"}, 2, "--role root: must be admin"},
      {{"tokens", "create", "--role=reporter"},
       2,
       "--trial: a reporter token is bound to one trial"},
      {{"tokens", "create", "--role=viewer", "--trial=7"},
       2,
       "--trial: only reporter tokens"},
      {{"tokens", "create", "--role=viewer", "--ttl=soon"},
       2,
       "--ttl soon: must be a duration"},
      {{"tokens", "create", "--role=reporter", "--trial=404"},
       1,
       "trial: trial 404 does not exist"},
      {{"tokens", "revoke"}, 2, "tokens revoke needs one token ID"},
      {{"tokens", "revoke", "x"}, 2, "the ID must be a number"},
      {{"tokens", "revoke", "55"}, 1, "token 55 does not exist"},
      {{"tokens", "list", "--role=admin"}, 2, "are for \"tokens create\""},
      {{"tokens", "drop"}, 2, "unknown command \"tokens drop\""},
  };
  for (const Case& c : cases) {
    auto run = Ctl(c.args);
    ASSERT_NE(run, nullptr);
    EXPECT_EQ(code_, c.code) << absl::StrJoin(c.args, " ");
    EXPECT_THAT(run->stderr_text(), HasSubstr(c.message))
        << absl::StrJoin(c.args, " ");
  }
  auto help = Ctl({"tokens", "--help"});
  ASSERT_NE(help, nullptr);
  EXPECT_EQ(code_, 0);
  EXPECT_THAT(help->stdout_text(), HasSubstr("shown once"));
  ASSERT_OK_AND_ASSIGN(std::vector<ApiToken> none, tokens_->List(Deadline()));
  EXPECT_TRUE(none.empty());
}

}  // namespace
}  // namespace metrics::storage::pg
