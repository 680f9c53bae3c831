// The pool after the database dropped its connections (terminated backends,
// as a restart does): the next calls, reads and writes, all succeed on fresh
// connections instead of failing one per dead idle connection; a connection
// that dies under a call is replaced once, and a body's own errors are not
// run again. Every connection it opens has the pool's session settings. A
// ReadSnapshot's statements share one snapshot and write nothing.
#include "storage/pg/connection_pool.h"

#include <pqxx/nontransaction>
#include <pqxx/transaction>

#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/status_macros.h"
#include "common/testing/eventually.h"
#include "common/testing/status_matchers.h"
#include "common/testing/test_time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "storage/pg/pooled_transaction.h"
#include "storage/pg/testing/pg_checks.h"
#include "tests/testing/test_database.h"

namespace metrics::storage::pg {
namespace {

using ::metrics::test_util::StatusIs;
using ::metrics::test_util::TestDatabase;

constexpr char kApplication[] = "connection_pool_test";

using ::metrics::test_util::Deadline;

class ConnectionPoolTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_OK_AND_ASSIGN(db_, TestDatabase::Create());
    ConnectionPoolOptions options;
    options.database_url = db_->url();
    options.application_name = kApplication;
    options.size = 4;
    pool_ = std::make_unique<ConnectionPool>(options);
  }

  // Opens every connection of the pool and returns them to it idle.
  void FillPool() {
    std::vector<ConnectionPool::Lease> leases;
    for (int i = 0; i < 4; ++i) {
      ASSERT_OK_AND_ASSIGN(ConnectionPool::Lease lease,
                           pool_->Acquire(Deadline()));
      leases.push_back(std::move(lease));
    }
  }

  absl::StatusOr<int> ReadOne() {
    return Read<int>(*pool_, "reading 1", Deadline(),
                     [](pqxx::transaction_base& tx) -> absl::StatusOr<int> {
                       return tx.exec1("SELECT 1")[0].as<int>();
                     });
  }

  std::unique_ptr<TestDatabase> db_;
  std::unique_ptr<ConnectionPool> pool_;
};

TEST_F(ConnectionPoolTest, EveryCallSucceedsAfterTheIdleConnectionsWereKilled) {
  FillPool();
  ASSERT_OK_AND_ASSIGN(int killed,
                       test_util::TerminateBackends(db_->url(), kApplication));
  ASSERT_EQ(killed, 4);
  // Terminated backends close their sockets at once, but give them a moment.
  absl::SleepFor(absl::Milliseconds(200));
  for (int i = 0; i < 8; ++i) {
    absl::StatusOr<int> one = ReadOne();
    EXPECT_TRUE(one.ok()) << "call " << i << ": " << one.status();
  }
  EXPECT_OK(Write<int>(*pool_, "writing", Deadline(),
                       [](pqxx::transaction_base& tx) -> absl::StatusOr<int> {
                         tx.exec0("CREATE TABLE pool_test (x int)");
                         return 0;
                       }));
}

// After CloseIdle the pool connects anew (as it must once a standby it
// read from was promoted), and still holds its size. Counted in this test's
// database: the other tests of the pool run beside it.
TEST_F(ConnectionPoolTest, CloseIdleClosesTheIdleConnections) {
  FillPool();
  auto count = [&] {
    return test_util::QueryScalar(
               db_->url(), absl::StrCat("SELECT count(*) FROM pg_stat_activity "
                                        "WHERE datname = current_database() "
                                        "AND application_name = '",
                                        kApplication, "'"))
        .value_or("");
  };
  ASSERT_EQ(count(), "4");
  pool_->CloseIdle();
  EXPECT_TRUE(::metrics::test_util::Eventually([&] { return count() == "0"; },
                                              absl::Seconds(5)));
  FillPool();
  EXPECT_EQ(count(), "4");
  EXPECT_OK(ReadOne());
}

// The pool's session settings (metricsd's: KeyedAccessSettings) hold on
// every connection it opens, also those replacing dead ones.
TEST_F(ConnectionPoolTest, EveryConnectionHasThePoolsSettings) {
  ConnectionPoolOptions options;
  options.database_url = db_->url();
  options.application_name = kApplication;
  options.size = 2;
  options.settings = KeyedAccessSettings();
  ConnectionPool pool(options);
  const auto seqscan = [](ConnectionPool& from) {
    return Read<std::string>(
               from, "reading a setting", Deadline(),
               [](pqxx::transaction_base& tx) -> absl::StatusOr<std::string> {
                 return tx.exec1("SHOW enable_seqscan")[0].as<std::string>();
               })
        .value_or("(failed)");
  };
  {
    std::vector<ConnectionPool::Lease> leases;
    for (int i = 0; i < 2; ++i) {
      ASSERT_OK_AND_ASSIGN(ConnectionPool::Lease lease, pool.Acquire(Deadline()));
      pqxx::nontransaction tx(lease.connection());
      EXPECT_EQ(tx.exec1("SHOW enable_seqscan")[0].as<std::string>(), "off");
      leases.push_back(std::move(lease));
    }
  }
  ASSERT_OK_AND_ASSIGN(int killed,
                       test_util::TerminateBackends(db_->url(), kApplication));
  ASSERT_GE(killed, 2);
  absl::SleepFor(absl::Milliseconds(200));  // the sockets' ends arrive
  EXPECT_EQ(seqscan(pool), "off");
  EXPECT_EQ(seqscan(*pool_), "on");  // SetUp's pool has no settings
}

TEST_F(ConnectionPoolTest, AConnectionKilledUnderACallIsReplacedOnce) {
  // The first run kills its own backend mid-transaction: the call runs
  // again on a fresh connection and succeeds.
  int runs = 0;
  absl::StatusOr<int> result = Read<int>(
      *pool_, "reading", Deadline(),
      [&](pqxx::transaction_base& tx) -> absl::StatusOr<int> {
        if (++runs == 1) tx.exec("SELECT pg_terminate_backend(pg_backend_pid())");
        return tx.exec1("SELECT 2")[0].as<int>();
      });
  EXPECT_OK(result);
  EXPECT_EQ(runs, 2);

  // A connection that keeps dying is given up after the second run.
  runs = 0;
  result = Read<int>(*pool_, "reading", Deadline(),
                     [&](pqxx::transaction_base& tx) -> absl::StatusOr<int> {
                       ++runs;
                       tx.exec("SELECT pg_terminate_backend(pg_backend_pid())");
                       return 0;
                     });
  EXPECT_THAT(result, StatusIs(absl::StatusCode::kUnavailable));
  EXPECT_EQ(runs, 2);
}

TEST_F(ConnectionPoolTest, ABodysOwnErrorRunsOnce) {
  int runs = 0;
  absl::StatusOr<int> result =
      Read<int>(*pool_, "reading", Deadline(),
                [&](pqxx::transaction_base&) -> absl::StatusOr<int> {
                  ++runs;
                  return absl::UnavailableError("the body's own answer");
                });
  EXPECT_THAT(result, StatusIs(absl::StatusCode::kUnavailable));
  EXPECT_EQ(runs, 1);
  runs = 0;
  result = Read<int>(*pool_, "reading", Deadline(),
                     [&](pqxx::transaction_base& tx) -> absl::StatusOr<int> {
                       ++runs;
                       tx.exec("SELECT no_such_column FROM pg_class");
                       return 0;
                     });
  EXPECT_THAT(result, StatusIs(absl::StatusCode::kFailedPrecondition));
  EXPECT_EQ(runs, 1);
}

TEST_F(ConnectionPoolTest, AReadSnapshotsStatementsSeeOneSnapshotAndWriteNothing) {
  ASSERT_OK(test_util::QueryScalar(db_->url(), "CREATE TABLE seen (n int)").status());
  // A commit elsewhere between the read's two statements: the second sees
  // what the first saw (a plain Read's second statement would see the row).
  absl::StatusOr<std::pair<std::string, std::string>> counts =
      ReadSnapshot<std::pair<std::string, std::string>>(
          *pool_, "reading twice", Deadline(),
          [&](pqxx::transaction_base& tx) -> absl::StatusOr<std::pair<std::string, std::string>> {
            const std::string before = tx.exec1("SELECT count(*) FROM seen")[0].c_str();
            RETURN_IF_ERROR(
                test_util::QueryScalar(db_->url(), "INSERT INTO seen VALUES (1)").status());
            return std::pair(before, std::string(tx.exec1("SELECT count(*) FROM seen")[0].c_str()));
          });
  ASSERT_OK(counts);
  EXPECT_EQ(counts->first, "0");
  EXPECT_EQ(counts->second, "0");
  EXPECT_EQ(test_util::QueryScalar(db_->url(), "SELECT count(*) FROM seen").value_or(""), "1");
  // Read-only, as every Read.
  absl::StatusOr<int> write =
      ReadSnapshot<int>(*pool_, "writing", Deadline(),
                        [](pqxx::transaction_base& tx) -> absl::StatusOr<int> {
                          tx.exec("INSERT INTO seen VALUES (2)");
                          return 0;
                        });
  EXPECT_FALSE(write.ok());
}

}  // namespace
}  // namespace metrics::storage::pg
