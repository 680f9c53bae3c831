// Exactly once, end to end: clients stream realistic reports to a real
// metricsd process, whose sealer seals their windows meanwhile, while the
// test breaks things (terminates its database connections, the sealer's
// too, restarts PostgreSQL, kills metricsd with SIGKILL and starts
// another). The clients resend from their last acknowledgement; afterwards
// the stored values must equal the sent values exactly and every rollup
// bucket must equal the aggregate of the raw rows. And once the database is
// back, no caller sees an error: gRPC and REST reads and stream opens right
// after the disturbance all succeed.
#include <grpcpp/create_channel.h>
#include <signal.h>

#include <atomic>
#include <thread>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "common/subprocess.h"
#include "common/testing/eventually.h"
#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "proto/metrics/v1/ingest.grpc.pb.h"
#include "proto/metrics/v1/trials.grpc.pb.h"
#include "storage/pg/testing/pg_checks.h"
#include "tests/testing/http_client.h"
#include "tests/testing/realistic_batch.h"
#include "tests/testing/resending_streamer.h"
#include "tests/testing/test_database.h"

namespace metrics::test_util {

using ::metrics::common::Subprocess;
namespace {

namespace pgtest = ::metrics::storage::pg::test_util;

constexpr int kAgents = 2;
constexpr int kBatches = 80;
constexpr int kReportsPerBatch = 10;
constexpr int kValuesPerReport = kRealisticValuesPerReport;  // 25

std::vector<v1::SystemMetricsBatch> AgentBatches(int32_t trial, int agent) {
  const absl::Time start = absl::Now() - absl::Hours(1) + absl::Nanoseconds(123456789);
  std::vector<v1::SystemMetricsBatch> batches;
  for (int b = 0; b < kBatches; ++b) {
    v1::SystemMetricsBatch batch;
    batch.set_trial_id(trial);
    batch.set_agent_id(absl::StrCat("agent-", agent));
    DeclareRealisticSeries(batch, absl::StrCat(agent, "-"));
    for (int r = 0; r < kReportsPerBatch; ++r) {
      AddRealisticReport(batch,
                         start + absl::Seconds(b * kReportsPerBatch + r),
                         agent * 100000 + b * kReportsPerBatch + r);
    }
    batches.push_back(std::move(batch));
  }
  return batches;
}

class ExactlyOnceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_OK_AND_ASSIGN(db_, TestDatabase::Create());
    StartMetricsd();
    auto trials = v1::TrialService::NewStub(grpc::CreateChannel(
        Target(), grpc::InsecureChannelCredentials()));
    grpc::ClientContext context;
    v1::CreateTrialRequest request;
    request.set_id(1);
    v1::Trial trial;
    ASSERT_TRUE(trials->CreateTrial(&context, request, &trial).ok());
  }

  void StartMetricsd() {
    absl::StatusOr<std::unique_ptr<Subprocess>> p = Subprocess::Start(
        {METRICSD_PATH, "--database-url=" + db_->url(),
         "--grpc-address=127.0.0.1:0", "--http-address=127.0.0.1:0",
         "--auth=off",
         // The reports are an hour old: their windows are sealed as they
         // come, so disturbances land in the middle of seals too.
         "--seal-every=100ms"});
    ASSERT_OK(p);
    absl::StatusOr<std::string> line =
        (*p)->WaitForLine("gRPC listening on", absl::Seconds(30));
    ASSERT_OK(line);
    int port = 0;
    ASSERT_TRUE(absl::SimpleAtoi(line->substr(line->rfind(':') + 1), &port));
    absl::StatusOr<std::string> http =
        (*p)->WaitForLine("HTTP listening on", absl::Seconds(30));
    ASSERT_OK(http);
    const size_t colon = http->rfind(':', http->find(" ("));
    ASSERT_TRUE(absl::SimpleAtoi(
        http->substr(colon + 1, http->find(' ', colon) - colon - 1),
        &http_port_));
    absl::MutexLock lock(&mu_);
    metricsd_ = *std::move(p);
    target_ = absl::StrCat("127.0.0.1:", port);
  }

  // One of each call a client makes, each alone: GetTrial and ListTrials
  // over gRPC, a stream open (until its first answer), GET /api/v1/trials/1.
  // Returns what failed, empty when nothing did.
  std::vector<std::string> OneOfEachCall(int round) {
    std::vector<std::string> failed;
    auto channel =
        grpc::CreateChannel(Target(), grpc::InsecureChannelCredentials());
    auto trials = v1::TrialService::NewStub(channel);
    const auto deadline = absl::ToChronoTime(absl::Now() + absl::Seconds(10));
    {
      grpc::ClientContext context;
      context.set_deadline(deadline);
      v1::GetTrialRequest request;
      request.set_trial_id(1);
      v1::Trial trial;
      if (grpc::Status s = trials->GetTrial(&context, request, &trial); !s.ok()) {
        failed.push_back("GetTrial: " + s.error_message());
      }
    }
    {
      grpc::ClientContext context;
      context.set_deadline(deadline);
      v1::ListTrialsResponse response;
      if (grpc::Status s = trials->ListTrials(&context, v1::ListTrialsRequest(),
                                              &response);
          !s.ok()) {
        failed.push_back("ListTrials: " + s.error_message());
      }
    }
    {
      auto ingest = v1::IngestService::NewStub(channel);
      grpc::ClientContext context;
      context.set_deadline(deadline);
      auto stream = ingest->StreamSystemMetrics(&context);
      v1::StreamSystemMetricsRequest open;
      open.mutable_open()->set_stream_id(absl::StrCat("probe-", round));
      open.mutable_open()->set_trial_id(1);
      v1::StreamSystemMetricsResponse first;
      if (!stream->Write(open) || !stream->Read(&first)) {
        failed.push_back("stream open: " + stream->Finish().error_message());
      } else {
        stream->WritesDone();
        (void)stream->Finish();
      }
    }
    absl::StatusOr<HttpResult> rest = HttpCall(http_port_, "GET", "/api/v1/trials/1");
    if (!rest.ok() || rest->status != 200) {
      failed.push_back("GET /api/v1/trials/1: " +
                       (rest.ok() ? rest->body : rest.status().ToString()));
    }
    return failed;
  }

  // Every connection of metricsd's pool in use at once, so all of them sit
  // idle afterwards.
  void FillThePool() {
    std::vector<std::thread> callers;
    for (int i = 0; i < 8; ++i) {
      callers.emplace_back([this, i] { (void)OneOfEachCall(1000 + i); });
    }
    for (auto& t : callers) t.join();
  }

  std::string Target() {
    absl::MutexLock lock(&mu_);
    return target_;
  }

  // Streams every agent's batches concurrently; `disturb` is called (once)
  // on the reader thread of agent 0 when it sees acknowledgement `at`.
  void StreamAll(int64_t at, std::function<void()> disturb) {
    std::atomic<bool> disturbed{false};
    std::vector<std::thread> agents;
    std::vector<absl::Status> results(kAgents);
    for (int a = 0; a < kAgents; ++a) {
      agents.emplace_back([&, a] {
        StreamerOptions options;
        options.stream_id = absl::StrCat("agent-", a, "/stream");
        options.trial_id = 1;
        options.window = 8;
        if (a == 0) {
          options.on_ack = [&](int64_t acked) {
            if (acked >= at && !disturbed.exchange(true)) disturb();
          };
        }
        ResendingStreamer streamer([this] { return Target(); }, options);
        results[a] = streamer.SendAll(AgentBatches(1, a));
        connections_ += streamer.connections();
        EXPECT_TRUE(streamer.rejections().empty());
      });
    }
    for (auto& t : agents) t.join();
    for (const absl::Status& r : results) ASSERT_OK(r);
    EXPECT_TRUE(disturbed.load());
  }

  void ExpectEverythingStoredOnce() {
    // Some windows were sealed (the sealer goes on meanwhile: each check
    // reads one snapshot).
    EXPECT_TRUE(Eventually(
        [&] {
          return pgtest::QueryScalar(db_->url(), "SELECT count(*) > 0 FROM metrics "
                                                 "WHERE sealed_values IS NOT NULL")
                     .value_or("") == "t";
        },
        absl::Seconds(30)));
    ASSERT_OK_AND_ASSIGN(int64_t values, pgtest::CountRawValues(db_->url(), 1));
    EXPECT_EQ(values,
              int64_t{kAgents} * kBatches * kReportsPerBatch * kValuesPerReport);
    EXPECT_EQ(pgtest::CountReports(db_->url(), 1).value_or(-1),
              kAgents * kBatches * kReportsPerBatch);
    EXPECT_EQ(pgtest::CountRepeatedReports(db_->url(), 1).value_or(-1), 0);
    ASSERT_OK_AND_ASSIGN(int64_t buckets,
                         pgtest::CheckRollupsMatchRawRows(db_->url(), 1));
    EXPECT_GT(buckets, 0);
  }

  // The disturbance hit a commit: a writer lane logged that it retried.
  void ExpectMetricsdRetried() {
    absl::MutexLock lock(&mu_);
    EXPECT_OK(metricsd_->WaitForLine("; retrying", absl::Seconds(10)));
  }

  std::unique_ptr<TestDatabase> db_;
  absl::Mutex mu_;
  std::unique_ptr<Subprocess> metricsd_ ABSL_GUARDED_BY(mu_);
  std::string target_ ABSL_GUARDED_BY(mu_);
  int http_port_ = 0;
  std::atomic<int> connections_{0};
};

TEST_F(ExactlyOnceTest, NoCallerSeesAnErrorOnceTheDatabaseIsBack) {
  const std::vector<std::pair<std::string, std::function<void()>>> disturbances =
      {{"terminated connections",
        [&] { EXPECT_OK(pgtest::TerminateBackends(db_->url(), "metricsd")); }},
       {"a restart", [&] { EXPECT_OK(pgtest::RestartServer(db_->url())); }}};
  for (const auto& [name, disturb] : disturbances) {
    FillThePool();
    disturb();
    absl::SleepFor(absl::Milliseconds(200));  // the sockets' ends arrive
    for (int round = 0; round < 6; ++round) {
      EXPECT_THAT(OneOfEachCall(round), ::testing::IsEmpty())
          << "after " << name << ", round " << round;
    }
  }
}

TEST_F(ExactlyOnceTest, SurvivesTerminatedDatabaseConnections) {
  StreamAll(10, [&] {
    for (int i = 0; i < 3; ++i) {
      absl::StatusOr<int> killed = pgtest::TerminateBackends(db_->url(), "metricsd");
      EXPECT_OK(killed);
      absl::SleepFor(absl::Milliseconds(30));  // a pace: three kills, apart
    }
  });
  ExpectMetricsdRetried();
  ExpectEverythingStoredOnce();
}

TEST_F(ExactlyOnceTest, SurvivesAPostgresRestart) {
  StreamAll(20, [&] { EXPECT_OK(pgtest::RestartServer(db_->url())); });
  ExpectMetricsdRetried();
  ExpectEverythingStoredOnce();
}

TEST_F(ExactlyOnceTest, SurvivesSigkillOfMetricsdAndAFreshStart) {
  StreamAll(25, [&] {
    {
      absl::MutexLock lock(&mu_);
      metricsd_->Signal(SIGKILL);
      EXPECT_OK(metricsd_->Wait(absl::Seconds(10)));
    }
    StartMetricsd();
  });
  EXPECT_GT(connections_.load(), kAgents);  // the clients had to reconnect
  ExpectEverythingStoredOnce();
}

}  // namespace
}  // namespace metrics::test_util
