// The database primary dies under a streaming fleet, with pg_auto_failover
// (its monitor and keepers, the real programs) promoting the synchronous
// standby (docs/operating.md, "When the database primary dies"). metricsd
// connects through a multi-host URL with target_session_attrs=read-write and
// must follow the promotion without a restart: 8 agents stream, the primary
// is killed (round 1: its keeper and server with SIGKILL; round 2: stopped
// without a shutdown checkpoint), and afterwards every acknowledged value is
// stored exactly once on the new primary, the rollups equal the raw rows,
// /healthz said so while there was no primary, and the old primary, started
// again, rejoins as a standby that serves no writes.
#include <grpcpp/create_channel.h>

#include <atomic>
#include <functional>
#include <iostream>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "common/subprocess.h"
#include "common/testing/eventually.h"
#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "storage/pg/testing/pg_checks.h"
#include "tests/testing/auto_failover_cluster.h"
#include "tests/testing/http_client.h"
#include "tests/testing/metricsd_process.h"
#include "tests/testing/realistic_batch.h"
#include "tests/testing/resending_streamer.h"
#include "tests/testing/trials.h"

namespace metrics::test_util {

using ::metrics::common::Subprocess;
namespace {

namespace pgtest = ::metrics::storage::pg::test_util;
using ::testing::HasSubstr;

constexpr int kFailoverAgents = 8;
constexpr int kFailoverBatches = 100;  // per agent and round
constexpr int kFailoverReportsPerBatch = 5;
constexpr int kValuesPerReport = kRealisticValuesPerReport;  // 25
// An agent waits this long after each acknowledgement, so the fleet is
// mid-stream (about 2 s of batches each) when the primary dies.
constexpr absl::Duration kPace = absl::Milliseconds(20);

std::vector<v1::SystemMetricsBatch> AgentBatches(int round, int agent) {
  // An hour old: their windows are sealed as they come, rollups included.
  const absl::Time start = absl::Now() - absl::Hours(1) +
                           absl::Seconds(round * kFailoverBatches * kFailoverReportsPerBatch);
  std::vector<v1::SystemMetricsBatch> batches;
  for (int b = 0; b < kFailoverBatches; ++b) {
    v1::SystemMetricsBatch batch;
    batch.set_trial_id(1);
    batch.set_agent_id(absl::StrCat("agent-", agent));
    DeclareRealisticSeries(batch, absl::StrCat(agent, "-"));
    for (int r = 0; r < kFailoverReportsPerBatch; ++r) {
      AddRealisticReport(batch, start + absl::Seconds(b * kFailoverReportsPerBatch + r),
                         round * 1000000 + agent * 10000 + b * kFailoverReportsPerBatch + r);
    }
    batches.push_back(std::move(batch));
  }
  return batches;
}

class DatabaseFailoverTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_OK_AND_ASSIGN(cluster_, AutoFailoverCluster::Create(2));
    ASSERT_OK_AND_ASSIGN(
        MetricsdProcess metricsd,
        StartMetricsd({METRICSD_PATH, "--database-url=" + cluster_->url("metrics"),
                       "--read-database-url=" + cluster_->url("metrics", "prefer-standby"),
                       "--migrate", "--grpc-address=127.0.0.1:0",
                       "--http-address=127.0.0.1:0", "--auth=off",
                       "--seal-every=100ms"}));
    metricsd_ = std::move(metricsd.process);
    target_ = metricsd.grpc_target;
    http_port_ = metricsd.http_port;
    ASSERT_OK(CreateTrial(grpc::CreateChannel(target_, grpc::InsecureChannelCredentials()), 1));
  }

  // Streams every agent's batches of `round`; once every agent has a
  // quarter of its batches acknowledged, calls `fail` (on a thread of its
  // own) and, from then until the round ends, asks /healthz every 100 ms.
  // Returns the time from the end of `fail` (the server is down) to the
  // first acknowledgement of a batch sent after it (with one batch in flight
  // an agent's in-flight batch may have committed before; its next cannot
  // have).
  absl::Duration StreamThrough(int round, std::function<void()> fail) {
    std::atomic<int64_t> acked[kFailoverAgents] = {};
    std::atomic<int64_t> acked_at_fail[kFailoverAgents];
    for (auto& a : acked_at_fail) a = INT64_MAX / 2;  // no overflow at + 2
    absl::Mutex mu;
    absl::Time fail_time = absl::InfiniteFuture();
    absl::Time first_after = absl::InfiniteFuture();
    std::atomic<bool> done{false};

    std::vector<std::thread> agents;
    std::vector<absl::Status> results(kFailoverAgents);
    for (int a = 0; a < kFailoverAgents; ++a) {
      agents.emplace_back([&, a] {
        StreamerOptions options;
        options.stream_id = absl::StrCat("agent-", a, "/round-", round);
        options.trial_id = 1;
        options.window = 1;
        options.on_ack = [&, a](int64_t sequence) {
          acked[a] = sequence;
          if (sequence >= acked_at_fail[a].load() + 2) {
            absl::MutexLock lock(&mu);
            first_after = std::min(first_after, absl::Now());
          }
          absl::SleepFor(kPace);
        };
        ResendingStreamer streamer([&] { return target_; }, options);
        results[a] = streamer.SendAll(AgentBatches(round, a));
        EXPECT_TRUE(streamer.rejections().empty());
      });
    }
    std::thread failer([&] {
      while (true) {
        bool all = true;
        for (const auto& a : acked) all = all && a.load() >= kFailoverBatches / 4;
        if (all) break;
        absl::SleepFor(absl::Milliseconds(5));
      }
      fail();  // the server is down once it returns
      {
        absl::MutexLock lock(&mu);
        fail_time = absl::Now();
      }
      for (int a = 0; a < kFailoverAgents; ++a) acked_at_fail[a] = acked[a].load();
    });
    std::thread health([&] {
      while (!done.load()) {
        absl::StatusOr<HttpResult> r = HttpCall(http_port_, "GET", "/healthz");
        if (r.ok() && r->status == 503) {
          absl::MutexLock lock(&unready_mu_);
          unready_bodies_.push_back(r->body);
        }
        absl::SleepFor(absl::Milliseconds(100));
      }
    });
    for (auto& t : agents) t.join();
    failer.join();
    done = true;
    health.join();
    for (const absl::Status& r : results) EXPECT_OK(r);
    absl::MutexLock lock(&mu);
    return first_after - fail_time;
  }

  // Everything of rounds 0..round stored once, on whichever server the
  // URL now reaches, with rollups equal to the raw rows.
  void ExpectEverythingStoredOnce(int round) {
    const std::string url = cluster_->url("metrics");
    EXPECT_TRUE(Eventually(
        [&] {
          return pgtest::QueryScalar(url, "SELECT count(*) > 0 FROM metrics "
                                          "WHERE sealed_values IS NOT NULL")
                     .value_or("") == "t";
        },
        absl::Seconds(30)));
    const int64_t reports = int64_t{round + 1} * kFailoverAgents * kFailoverBatches * kFailoverReportsPerBatch;
    EXPECT_EQ(pgtest::CountRawValues(url, 1).value_or(-1), reports * kValuesPerReport);
    EXPECT_EQ(pgtest::CountReports(url, 1).value_or(-1), reports);
    EXPECT_EQ(pgtest::CountRepeatedReports(url, 1).value_or(-1), 0);
    ASSERT_OK_AND_ASSIGN(int64_t buckets, pgtest::CheckRollupsMatchRawRows(url, 1));
    EXPECT_GT(buckets, 0);
  }

  // A number of metricsd's /metrics, -1 when absent.
  double Scraped(absl::string_view name) {
    absl::StatusOr<HttpResult> m = HttpCall(http_port_, "GET", "/metrics");
    if (!m.ok()) return -1;
    const std::string key = absl::StrCat("\n", name, " ");
    const size_t at = m->body.find(key);
    double value = -1;
    if (at != std::string::npos) {
      const size_t start = at + key.size();
      (void)absl::SimpleAtod(m->body.substr(start, m->body.find('\n', start) - start),
                             &value);
    }
    return value;
  }

  // The old primary, started again, follows the new one and refuses writes;
  // the new one is back to committing synchronously, and trial lists are
  // read from the standby again (the read URL prefers a standby).
  void ExpectRejoinsAsStandby(int old_primary, int new_primary) {
    const double standby_reads = Scraped("metricsd_standby_reads_total");
    ASSERT_OK(cluster_->Start(old_primary));
    ASSERT_OK(cluster_->AwaitState(old_primary, "secondary", absl::Seconds(90)));
    ASSERT_OK(cluster_->AwaitState(new_primary, "primary", absl::Seconds(60)));
    const std::string old_url = cluster_->node_url(old_primary, "metrics");
    EXPECT_EQ(pgtest::QueryScalar(old_url, "SELECT pg_is_in_recovery()").value_or(""), "t");
    absl::StatusOr<std::string> write =
        pgtest::QueryScalar(old_url, "CREATE TABLE written_on_a_standby (x int)");
    EXPECT_FALSE(write.ok());
    EXPECT_THAT(write.status().message(), HasSubstr("read-only"));
    // metricsd sees the new primary, waiting for its standby again.
    EXPECT_TRUE(Eventually(
        [&] {
          absl::StatusOr<HttpResult> m = HttpCall(http_port_, "GET", "/metrics");
          return m.ok() && absl::StrContains(m->body, "\nmetricsd_database_primary 1\n") &&
                 absl::StrContains(m->body, "\nmetricsd_database_sync_standbys 1\n");
        },
        absl::Seconds(30), absl::Milliseconds(200)));
    EXPECT_TRUE(Eventually(
        [&] {
          absl::StatusOr<HttpResult> list = HttpCall(http_port_, "GET", "/api/v1/trials");
          return list.ok() && list->status == 200 &&
                 Scraped("metricsd_standby_reads_total") > standby_reads;
        },
        absl::Seconds(30), absl::Milliseconds(200)));
  }

  void ExpectUnreadyWhileNoPrimary() {
    absl::MutexLock lock(&unready_mu_);
    ASSERT_FALSE(unready_bodies_.empty()) << "/healthz never said 503";
    // While the old primary is gone and the standby not yet promoted, the
    // standby answers: the database is there, its primary is not.
    EXPECT_THAT(unready_bodies_,
                ::testing::Contains(HasSubstr("no primary database")));
    absl::StatusOr<HttpResult> now = HttpCall(http_port_, "GET", "/healthz");
    ASSERT_OK(now);
    EXPECT_EQ(now->status, 200);
    unready_bodies_.clear();
  }

  std::unique_ptr<AutoFailoverCluster> cluster_;
  std::unique_ptr<Subprocess> metricsd_;
  std::string target_;
  int http_port_ = 0;
  absl::Mutex unready_mu_;
  std::vector<std::string> unready_bodies_;
};

TEST_F(DatabaseFailoverTest, EveryAcknowledgedBatchSurvivesThePrimarysDeath) {
  // Round 0: node0, the primary, dies whole. Round 1: node1, the primary
  // since, stops without a shutdown checkpoint.
  const struct {
    const char* how;
    absl::Status (AutoFailoverCluster::*fail)(int);
  } rounds[] = {{"killed (SIGKILL)", &AutoFailoverCluster::Kill},
                {"stopped in immediate mode", &AutoFailoverCluster::StopImmediately}};
  for (int round = 0; round < 2; ++round) {
    SCOPED_TRACE(rounds[round].how);
    const int primary = round, standby = 1 - round;
    const absl::Duration took = StreamThrough(
        round, [&] { ASSERT_OK((cluster_.get()->*rounds[round].fail)(primary)); });
    ASSERT_OK(cluster_->AwaitPrimary(standby, absl::Seconds(60)));
    std::cout << "first acknowledgement " << absl::FormatDuration(took)
              << " after the primary was " << rounds[round].how << std::endl;
    EXPECT_LT(took, absl::Seconds(60));
    ExpectEverythingStoredOnce(round);
    ExpectUnreadyWhileNoPrimary();
    ExpectRejoinsAsStandby(primary, standby);
  }
}

}  // namespace
}  // namespace metrics::test_util
