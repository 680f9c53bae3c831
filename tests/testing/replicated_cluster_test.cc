// The primary + standby fixture does what the read-path tests will rely on:
// the standby is a read-only hot standby that replays the primary's writes,
// and it can be stopped and started again.
#include "tests/testing/replicated_cluster.h"

#include "common/testing/status_matchers.h"
#include "gtest/gtest.h"
#include "storage/pg/testing/pg_checks.h"

namespace metrics::test_util {
namespace {

using ::metrics::storage::pg::test_util::QueryScalar;

TEST(ReplicatedClusterTest, TheStandbyReplaysThePrimarysWritesAndRefusesWrites) {
  ASSERT_OK_AND_ASSIGN(auto cluster, ReplicatedCluster::Create());
  const std::string primary = cluster->primary_url("postgres");
  const std::string standby = cluster->standby_url("postgres");
  EXPECT_EQ(QueryScalar(primary, "SELECT pg_is_in_recovery()").value_or(""), "f");
  EXPECT_EQ(QueryScalar(standby, "SELECT pg_is_in_recovery()").value_or(""), "t");

  ASSERT_OK(QueryScalar(primary, "CREATE TABLE t AS SELECT generate_series(1, 1000) AS n")
                .status());
  ASSERT_OK(cluster->AwaitStandbyCaughtUp(absl::Seconds(30)));
  EXPECT_EQ(QueryScalar(standby, "SELECT sum(n) FROM t").value_or(""), "500500");
  EXPECT_FALSE(QueryScalar(standby, "INSERT INTO t VALUES (1)").ok());

  // Stopped, it is unreachable; started again, it catches up.
  ASSERT_OK(cluster->Stop(ReplicatedCluster::Server::kStandby));
  EXPECT_FALSE(QueryScalar(standby, "SELECT 1").ok());
  ASSERT_OK(QueryScalar(primary, "INSERT INTO t VALUES (7)").status());
  ASSERT_OK(cluster->Start(ReplicatedCluster::Server::kStandby));
  ASSERT_OK(cluster->AwaitStandbyCaughtUp(absl::Seconds(30)));
  EXPECT_EQ(QueryScalar(standby, "SELECT sum(n) FROM t").value_or(""), "500507");
}

}  // namespace
}  // namespace metrics::test_util
