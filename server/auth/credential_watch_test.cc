// The credential watch on the real token table: streams of a token revoked
// in the database (by another server's store) or expired are told once,
// UNAUTHENTICATED, within recheck and a tick; streams of other tokens are
// not; a store that cannot answer ends nothing; a stream may let go of its
// registration inside its own callback.
#include "server/auth/credential_watch.h"

#include <atomic>
#include <memory>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "common/testing/eventually.h"
#include "common/testing/status_matchers.h"
#include "common/testing/test_time.h"
#include "gtest/gtest.h"
#include "storage/pg/pg_metric_store.h"
#include "storage/pg/pg_token_store.h"
#include "tests/testing/test_database.h"

namespace metrics::server {
namespace {

using ::metrics::test_util::TestDatabase;
using storage::TokenRole;

using ::metrics::test_util::Deadline;

// What a stream heard.
struct Heard {
  absl::Mutex mu;
  std::vector<absl::Status> told ABSL_GUARDED_BY(mu);
  size_t count() {
    absl::MutexLock lock(&mu);
    return told.size();
  }
};

class CredentialWatchTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_OK_AND_ASSIGN(db_, TestDatabase::Create());
    store_ = std::make_unique<storage::pg::PgTokenStore>(db_->url());
    AuthenticatorOptions options;
    options.recheck = absl::Milliseconds(300);
    auth_ = std::make_unique<Authenticator>(store_.get(), options);
    watch_ = std::make_unique<CredentialWatch>(auth_.get(),
                                               absl::Milliseconds(50));
  }
  void TearDown() override { watch_.reset(); }

  storage::CreatedToken NewToken(std::optional<absl::Duration> ttl = {}) {
    storage::TokenRequest request;
    request.role = TokenRole::kViewer;
    request.ttl = ttl;
    auto created = store_->Create(request, Deadline());
    EXPECT_OK(created);
    return created.ok() ? *created : storage::CreatedToken{};
  }

  std::unique_ptr<CredentialWatch::Watched> Watch(const std::string& secret,
                                                  Heard& heard) {
    return watch_->Watch("Bearer " + secret, [&heard](absl::Status s) {
      absl::MutexLock lock(&heard.mu);
      heard.told.push_back(std::move(s));
    });
  }

  std::unique_ptr<TestDatabase> db_;
  std::unique_ptr<storage::pg::PgTokenStore> store_;
  std::unique_ptr<Authenticator> auth_;
  std::unique_ptr<CredentialWatch> watch_;
};

TEST_F(CredentialWatchTest, StreamsOfARevokedTokenAreToldOnceAndNoOthers) {
  const storage::CreatedToken revoked = NewToken();
  const storage::CreatedToken kept = NewToken();
  Heard first, second, other;
  auto a = Watch(revoked.secret, first);
  auto b = Watch(revoked.secret, second);
  auto c = Watch(kept.secret, other);
  absl::SleepFor(absl::Milliseconds(200));  // checked, and still good
  EXPECT_EQ(first.count() + second.count() + other.count(), 0u);

  storage::pg::PgTokenStore elsewhere(db_->url());
  ASSERT_OK(elsewhere.Revoke(revoked.token.id, Deadline()).status());
  const absl::Time at = absl::Now();
  EXPECT_TRUE(test_util::Eventually(
      [&] { return first.count() == 1 && second.count() == 1; },
      absl::Seconds(5), absl::Milliseconds(10)));
  // Within recheck (300 ms) and a tick (50 ms), and some slack.
  EXPECT_LT(absl::Now() - at, absl::Seconds(1));
  absl::SleepFor(absl::Milliseconds(500));
  EXPECT_EQ(first.count(), 1u);  // once
  EXPECT_EQ(other.count(), 0u);
  absl::MutexLock lock(&first.mu);
  EXPECT_EQ(first.told[0].code(), absl::StatusCode::kUnauthenticated);
}

TEST_F(CredentialWatchTest, AnExpiredTokenEndsItsStreams) {
  const storage::CreatedToken brief = NewToken(absl::Seconds(1));
  Heard heard;
  auto watched = Watch(brief.secret, heard);
  EXPECT_TRUE(test_util::Eventually([&] { return heard.count() == 1; },
                                    absl::Seconds(5), absl::Milliseconds(10)));
}

TEST_F(CredentialWatchTest, AStreamMayLetGoInsideItsCallback) {
  const storage::CreatedToken token = NewToken();
  absl::Notification done;
  std::unique_ptr<CredentialWatch::Watched> watched;
  absl::Mutex mu;
  {
    absl::MutexLock lock(&mu);
    watched = watch_->Watch("Bearer " + token.secret, [&](absl::Status) {
      {
        absl::MutexLock lock(&mu);
        watched.reset();  // as a reactor whose Finish ran OnDone here
      }
      // Last: once told, the test body returns and `mu` is gone.
      done.Notify();
    });
  }
  storage::pg::PgTokenStore elsewhere(db_->url());
  ASSERT_OK(elsewhere.Revoke(token.token.id, Deadline()).status());
  EXPECT_TRUE(done.WaitForNotificationWithTimeout(absl::Seconds(5)));
  EXPECT_EQ(watch_->watched(), 0u);
}

TEST_F(CredentialWatchTest, AStoreThatCannotAnswerEndsNothing) {
  const storage::CreatedToken token = NewToken();
  storage::pg::PgTokenStore nowhere("postgresql://127.0.0.1:1/none");
  Authenticator auth(&nowhere, AuthenticatorOptions());
  CredentialWatch watch(&auth, absl::Milliseconds(20));
  Heard heard;
  auto watched = watch.Watch("Bearer " + token.secret, [&heard](absl::Status s) {
    absl::MutexLock lock(&heard.mu);
    heard.told.push_back(std::move(s));
  });
  absl::SleepFor(absl::Milliseconds(300));
  EXPECT_EQ(heard.count(), 0u);
  watched.reset();
}

}  // namespace
}  // namespace metrics::server
