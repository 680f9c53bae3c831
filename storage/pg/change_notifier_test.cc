// ChangeNotifier on a real PostgreSQL: a NOTIFY from another session
// reaches the subscribers of its trial (and agent), and Shutdown ends the
// listening thread at once rather than at its next wait's timeout, which
// every store's shutdown waited for.
#include "storage/pg/change_notifier.h"

#include <pqxx/connection>
#include <pqxx/nontransaction>

#include <atomic>
#include <memory>
#include <string>

#include "absl/time/clock.h"
#include "common/testing/eventually.h"
#include "common/testing/status_matchers.h"
#include "gtest/gtest.h"
#include "tests/testing/test_database.h"

namespace metrics::storage::pg {
namespace {

TEST(ChangeNotifierTest, ANotifyReachesItsSubscribersAndShutdownIsPrompt) {
  ASSERT_OK_AND_ASSIGN(auto db, ::metrics::test_util::TestDatabase::Create({/*migrate=*/false}));
  ChangeNotifier notifier(db->url());
  std::atomic<int> heard_a{0}, heard_b{0};
  auto a = notifier.Subscribe(7, {"a"}, [&] { ++heard_a; });
  auto b = notifier.Subscribe(7, {"b"}, [&] { ++heard_b; });
  pqxx::connection conn(db->url());
  // Sent until heard: the notifier may not be listening yet (it calls every
  // subscriber once when it starts, so the first counts are not the NOTIFY's).
  ASSERT_TRUE(::metrics::test_util::Eventually(
      [&] {
        const int before = heard_b.load();
        pqxx::nontransaction(conn).exec("NOTIFY metrics_ingest, '7 a'");
        absl::SleepFor(absl::Milliseconds(50));
        return heard_a.load() > 1 && heard_b.load() == before;
      },
      absl::Seconds(10)));

  // The listening thread is now waiting for the next notification.
  const absl::Time start = absl::Now();
  notifier.Shutdown();
  EXPECT_LT(absl::Now() - start, absl::Milliseconds(250));
}

}  // namespace
}  // namespace metrics::storage::pg
