// Runs the real metricsd binary against a throwaway database: the schema
// check at start, --migrate, gRPC and HTTP health, and graceful stop.
#include <grpcpp/create_channel.h>
#include <grpcpp/security/credentials.h>
#include <signal.h>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/database_url.h"
#include "common/subprocess.h"
#include "common/testing/eventually.h"
#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "proto/grpc/health/v1/health.grpc.pb.h"
#include "storage/pg/testing/pg_checks.h"
#include "tests/testing/http_client.h"
#include "tests/testing/test_database.h"

namespace metrics::server {
namespace {

using ::grpc::health::v1::Health;
using ::grpc::health::v1::HealthCheckRequest;
using ::grpc::health::v1::HealthCheckResponse;
using ::metrics::test_util::HttpCall;
using ::metrics::common::Subprocess;
using ::metrics::test_util::TestDatabase;
using ::metrics::test_util::TestDatabaseOptions;
using ::testing::HasSubstr;
using ::testing::Not;

std::unique_ptr<TestDatabase> NewDatabase(bool migrate) {
  TestDatabaseOptions options;
  options.migrate = migrate;
  absl::StatusOr<std::unique_ptr<TestDatabase>> db =
      TestDatabase::Create(options);
  EXPECT_OK(db);
  return db.ok() ? *std::move(db) : nullptr;
}

absl::StatusOr<std::unique_ptr<Subprocess>> StartMetricsd(
    const TestDatabase& db, std::vector<std::string> extra = {}) {
  std::vector<std::string> argv = {METRICSD_PATH,
                                   "--database-url=" + db.url(),
                                   "--grpc-address=127.0.0.1:0",
                                   "--http-address=127.0.0.1:0"};
  argv.insert(argv.end(), extra.begin(), extra.end());
  return Subprocess::Start(argv);
}

// Reads the port from a line such as "metricsd: gRPC listening on
// 127.0.0.1:40123" (anything after the port is ignored).
int PortOf(absl::string_view line) {
  const size_t colon = line.rfind("127.0.0.1:");
  int port = 0;
  absl::string_view rest = line.substr(colon + 10);
  rest = rest.substr(0, rest.find(' '));
  EXPECT_TRUE(absl::SimpleAtoi(rest, &port)) << line;
  return port;
}

HealthCheckResponse::ServingStatus GrpcHealth(int port) {
  auto stub = Health::NewStub(grpc::CreateChannel(
      absl::StrCat("127.0.0.1:", port), grpc::InsecureChannelCredentials()));
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(10)));
  HealthCheckRequest request;
  HealthCheckResponse response;
  grpc::Status status = stub->Check(&context, request, &response);
  EXPECT_TRUE(status.ok()) << status.error_message();
  return response.status();
}

TEST(MetricsdTest, RefusesToStartWhenMigrationsArePending) {
  std::unique_ptr<TestDatabase> db = NewDatabase(/*migrate=*/false);
  ASSERT_NE(db, nullptr);
  ASSERT_OK_AND_ASSIGN(auto metricsd, StartMetricsd(*db));
  ASSERT_OK_AND_ASSIGN(int code, metricsd->Wait(absl::Seconds(30)));
  EXPECT_EQ(code, 1);
  EXPECT_THAT(metricsd->stderr_text(),
              HasSubstr("metricsd: error: the database schema is not current: "
                        "8 migration(s) pending (0001_init, "
                        "0002_packed_rollups, 0003_api_tokens, "
                        "0004_packed_values, 0005_agent_inventories, "
                        "0006_trial_runs, 0007_sealed_windows, "
                        "0008_rollups_at_seal); run "
                        "\"metricsctl migrate up\" "
                        "or start metricsd with --migrate"));
}

TEST(MetricsdTest, MigrateFlagAppliesMigrationsThenServesHealth) {
  std::unique_ptr<TestDatabase> db = NewDatabase(/*migrate=*/false);
  ASSERT_NE(db, nullptr);
  ASSERT_OK_AND_ASSIGN(auto metricsd, StartMetricsd(*db, {"--migrate"}));
  ASSERT_OK_AND_ASSIGN(std::string grpc_line,
                       metricsd->WaitForLine("gRPC listening on",
                                             absl::Seconds(30)));
  ASSERT_OK_AND_ASSIGN(std::string http_line,
                       metricsd->WaitForLine("HTTP listening on",
                                             absl::Seconds(30)));
  EXPECT_THAT(metricsd->stderr_text(),
              HasSubstr("applied migration 0001_init"));

  EXPECT_EQ(GrpcHealth(PortOf(grpc_line)), HealthCheckResponse::SERVING);
  ASSERT_OK_AND_ASSIGN(auto healthz,
                       HttpCall(PortOf(http_line), "GET", "/healthz"));
  EXPECT_EQ(healthz.status, 200);
  EXPECT_EQ(healthz.body, "{\"status\":\"SERVING\"}");

  ASSERT_OK_AND_ASSIGN(auto missing,
                       HttpCall(PortOf(http_line), "GET", "/no/such/path"));
  EXPECT_EQ(missing.status, 404);
  EXPECT_EQ(missing.body,
            "{\"code\":5,\"message\":\"no route for GET /no/such/path\","
            "\"details\":[]}");
  ASSERT_OK_AND_ASSIGN(auto post,
                       HttpCall(PortOf(http_line), "POST", "/healthz"));
  EXPECT_EQ(post.status, 405);
}

// Polls `path` until it answers `status`; the last answer.
absl::StatusOr<test_util::HttpResult> AwaitStatus(int port, const std::string& path,
                                                  int status) {
  absl::StatusOr<test_util::HttpResult> r;
  test_util::Eventually(
      [&] {
        r = HttpCall(port, "GET", path);
        return r.ok() && r->status == status;
      },
      absl::Seconds(15), absl::Milliseconds(100));
  return r;
}

HealthCheckResponse::ServingStatus AwaitGrpcHealth(
    int port, HealthCheckResponse::ServingStatus status) {
  HealthCheckResponse::ServingStatus now;
  test_util::Eventually([&] { return (now = GrpcHealth(port)) == status; },
                        absl::Seconds(5), absl::Milliseconds(50));
  return now;
}

// Readiness follows the database; liveness does not.
TEST(MetricsdTest, HealthzSaysNotReadyWhileTheDatabaseIsUnreachable) {
  std::unique_ptr<TestDatabase> db = NewDatabase(/*migrate=*/true);
  ASSERT_NE(db, nullptr);
  ASSERT_OK_AND_ASSIGN(auto metricsd, StartMetricsd(*db));
  ASSERT_OK_AND_ASSIGN(std::string grpc_line,
                       metricsd->WaitForLine("gRPC listening on", absl::Seconds(30)));
  ASSERT_OK_AND_ASSIGN(std::string http_line,
                       metricsd->WaitForLine("HTTP listening on", absl::Seconds(30)));
  const int http = PortOf(http_line), grpc = PortOf(grpc_line);
  ASSERT_OK_AND_ASSIGN(auto ready, HttpCall(http, "GET", "/healthz"));
  EXPECT_EQ(ready.status, 200);

  const std::string admin = common::ResolveDatabaseUrl("");
  ASSERT_OK(storage::pg::test_util::SetConnectionsAllowed(admin, db->name(), false));
  const absl::Time cut = absl::Now();
  ASSERT_OK_AND_ASSIGN(auto not_ready, AwaitStatus(http, "/healthz", 503));
  EXPECT_EQ(not_ready.status, 503);
  EXPECT_LT(absl::Now() - cut, absl::Seconds(5));
  EXPECT_EQ(not_ready.body,
            "{\"status\":\"NOT_SERVING\",\"reason\":\"database unreachable\"}");
  EXPECT_EQ(AwaitGrpcHealth(grpc, HealthCheckResponse::NOT_SERVING),
            HealthCheckResponse::NOT_SERVING);
  ASSERT_OK_AND_ASSIGN(auto alive, HttpCall(http, "GET", "/livez"));
  EXPECT_EQ(alive.status, 200);
  EXPECT_EQ(alive.body, "{\"status\":\"ALIVE\"}");
  ASSERT_OK_AND_ASSIGN(auto post, HttpCall(http, "POST", "/livez"));
  EXPECT_EQ(post.status, 405);

  ASSERT_OK(storage::pg::test_util::SetConnectionsAllowed(admin, db->name(), true));
  ASSERT_OK_AND_ASSIGN(auto again, AwaitStatus(http, "/healthz", 200));
  EXPECT_EQ(again.status, 200);
  EXPECT_EQ(AwaitGrpcHealth(grpc, HealthCheckResponse::SERVING),
            HealthCheckResponse::SERVING);
  metricsd->Signal(SIGTERM);
  ASSERT_OK_AND_ASSIGN(int code, metricsd->Wait(absl::Seconds(30)));
  EXPECT_EQ(code, 0);
  EXPECT_THAT(metricsd->stderr_text(), HasSubstr("database unreachable, not ready: "));
  EXPECT_THAT(metricsd->stderr_text(), HasSubstr("database reachable again: ready"));
}

TEST(MetricsdTest, SigtermStopsGracefullyWithExitCodeZero) {
  std::unique_ptr<TestDatabase> db = NewDatabase(/*migrate=*/true);
  ASSERT_NE(db, nullptr);
  ASSERT_OK_AND_ASSIGN(auto metricsd, StartMetricsd(*db));
  ASSERT_OK_AND_ASSIGN(std::string http_line,
                       metricsd->WaitForLine("HTTP listening on",
                                             absl::Seconds(30)));
  const int http_port = PortOf(http_line);
  metricsd->Signal(SIGTERM);
  ASSERT_OK_AND_ASSIGN(int code, metricsd->Wait(absl::Seconds(30)));
  EXPECT_EQ(code, 0) << metricsd->stderr_text();
  EXPECT_THAT(metricsd->stderr_text(), HasSubstr("shutting down"));
  EXPECT_THAT(metricsd->stderr_text(), HasSubstr("metricsd stopped"));
  EXPECT_FALSE(HttpCall(http_port, "GET", "/healthz").ok());
}

TEST(MetricsdTest, UnusableAddressIsOneClearLine) {
  std::unique_ptr<TestDatabase> db = NewDatabase(/*migrate=*/true);
  ASSERT_NE(db, nullptr);
  ASSERT_OK_AND_ASSIGN(auto metricsd,
                       StartMetricsd(*db, {"--grpc-address=localhost"}));
  ASSERT_OK_AND_ASSIGN(int code, metricsd->Wait(absl::Seconds(30)));
  EXPECT_EQ(code, 1);
  EXPECT_EQ(metricsd->stderr_text(),
            "metricsd: error: --grpc-address \"localhost\": no port "
            "(expected host:port)\n");
}

TEST(MetricsdTest, HelpListsTheFlagsWithTheirDefaults) {
  ASSERT_OK_AND_ASSIGN(auto metricsd, Subprocess::Start({METRICSD_PATH, "--help"}));
  ASSERT_OK_AND_ASSIGN(int code, metricsd->Wait(absl::Seconds(30)));
  EXPECT_NE(code, 0);  // absl's exit status for a usage request
  const std::string& help = metricsd->stdout_text();
  EXPECT_THAT(help, HasSubstr("Usage: metricsd"));
  EXPECT_THAT(help, Not(HasSubstr("No flags matched")));
  EXPECT_THAT(help, HasSubstr("-database_url"));
  EXPECT_THAT(help, HasSubstr("-raw_retention"));
  EXPECT_THAT(help, HasSubstr("-writer_lanes"));
  EXPECT_THAT(help, HasSubstr("default: 2"));
}

TEST(MetricsdTest, RawRetentionFlagRemovesOldRawRowsAtStart) {
  std::unique_ptr<TestDatabase> db = NewDatabase(/*migrate=*/true);
  ASSERT_NE(db, nullptr);
  const auto sql = [&](const std::string& statement) {
    absl::StatusOr<std::string> r =
        storage::pg::test_util::QueryScalar(db->url(), statement);
    EXPECT_OK(r);
    return r.ok() ? *r : "";
  };
  sql("INSERT INTO trials (id) VALUES (1)");
  ASSERT_EQ(sql("INSERT INTO series (trial_id, metric_group, agent_id, name) "
                "VALUES (1, 'system', 'a', 'cpu_util_simple') "
                "RETURNING series_id"),
            "1");
  // Packed rows of one value (series 1, 9.8) 40, 35 and 1 days old.
  sql("INSERT INTO metrics_profiling (trial_id, partition_type, metric_group, "
      "agent_id, end_time, packed_values) SELECT 1, 'PROFILING', 'system', "
      "'a', now() - d * interval '1 day', '\\x011162'::bytea "
      "FROM unnest(ARRAY[40, 35, 1]) d");
  ASSERT_OK_AND_ASSIGN(auto metricsd,
                       StartMetricsd(*db, {"--raw-retention=30d", "--auth=off"}));
  ASSERT_OK(metricsd->WaitForLine("HTTP listening on", absl::Seconds(30)).status());
  EXPECT_TRUE(test_util::Eventually(
      [&] { return sql("SELECT count(*) FROM metrics_profiling") == "1"; },
      absl::Seconds(20), absl::Milliseconds(100)));
  EXPECT_EQ(sql("SELECT count(*) FROM metrics_profiling WHERE end_time > "
                "now() - interval '2 days'"),
            "1");
  metricsd->Signal(SIGTERM);
  ASSERT_OK_AND_ASSIGN(int code, metricsd->Wait(absl::Seconds(30)));
  EXPECT_EQ(code, 0) << metricsd->stderr_text();
  EXPECT_THAT(metricsd->stderr_text(),
              HasSubstr("raw retention: removed 2 raw rows before"));

  ASSERT_OK_AND_ASSIGN(auto bad, StartMetricsd(*db, {"--raw-retention=0d"}));
  ASSERT_OK_AND_ASSIGN(code, bad->Wait(absl::Seconds(30)));
  EXPECT_EQ(code, 2);
  EXPECT_THAT(bad->stderr_text(),
              HasSubstr("metricsd: error: --raw-retention 0d: must be a "
                        "positive duration such as 30d or 720h"));
}

TEST(MetricsdTest, AStandbyThatDoesNotAnswerLeavesReadsOnThePrimary) {
  std::unique_ptr<TestDatabase> db = NewDatabase(/*migrate=*/true);
  ASSERT_NE(db, nullptr);
  // No server listens on this socket folder.
  ASSERT_OK_AND_ASSIGN(
      auto metricsd,
      StartMetricsd(*db, {"--read-database-url=host=/nonexistent port=1",
                          "--auth=off"}));
  ASSERT_OK(metricsd->WaitForLine("HTTP listening on", absl::Seconds(30)).status());
  test_util::Eventually(
      [&] {
        return metricsd->stderr_text().find("reads go to the primary") !=
               std::string::npos;
      },
      absl::Seconds(20), absl::Milliseconds(100));
  metricsd->Signal(SIGTERM);
  ASSERT_OK_AND_ASSIGN(int code, metricsd->Wait(absl::Seconds(30)));
  EXPECT_EQ(code, 0) << metricsd->stderr_text();
  EXPECT_THAT(metricsd->stderr_text(),
              HasSubstr("reads go to the primary: the standby does not answer "
                        "(connecting to PostgreSQL: "));

  ASSERT_OK_AND_ASSIGN(auto bad, StartMetricsd(*db, {"--max-read-lag=0s"}));
  ASSERT_OK_AND_ASSIGN(code, bad->Wait(absl::Seconds(30)));
  EXPECT_EQ(code, 2);
  EXPECT_THAT(bad->stderr_text(),
              HasSubstr("metricsd: error: --max-read-lag 0: must be a positive "
                        "duration such as 5s"));
  ASSERT_OK_AND_ASSIGN(
      auto typo, StartMetricsd(*db, {"--read-database-url=host='unclosed"}));
  ASSERT_OK_AND_ASSIGN(code, typo->Wait(absl::Seconds(30)));
  EXPECT_EQ(code, 1);
  EXPECT_THAT(typo->stderr_text(),
              HasSubstr("metricsd: error: --read-database-url: database URL: "
                        "unterminated quoted string"));
}

}  // namespace
}  // namespace metrics::server
