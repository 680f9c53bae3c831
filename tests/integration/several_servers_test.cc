// Several metricsd replicas on one database. A stream that moves
// from one server to another while the first is still committing (a
// "zombie": slow, not dead) is stored exactly once; two servers ingesting
// into the same trial and agents keep rollups equal to the raw rows and the
// series limit exact; copies of one report of the platform's harness posted
// to both at once are stored once; a follower on one metricsd process sees
// what another commits within a second.
#include <grpcpp/client_context.h>
#include <grpcpp/create_channel.h>

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/testing/eventually.h"
#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "proto/metrics/v1/ingest.grpc.pb.h"
#include "proto/metrics/v1/query.grpc.pb.h"
#include "storage/pg/testing/pg_checks.h"
#include "tests/testing/http_client.h"
#include "tests/testing/metricsd_process.h"
#include "tests/testing/realistic_batch.h"
#include "tests/testing/resending_streamer.h"
#include "tests/testing/test_database.h"
#include "tests/testing/test_server.h"
#include "tests/testing/trials.h"

namespace metrics::test_util {
namespace {

namespace pgtest = ::metrics::storage::pg::test_util;

using Stream = grpc::ClientReaderWriter<v1::StreamSystemMetricsRequest,
                                        v1::StreamSystemMetricsResponse>;

constexpr int kReportsPerBatch = 10;

v1::SystemMetricsBatch Batch(int64_t sequence, absl::Time start) {
  v1::SystemMetricsBatch batch;
  batch.set_trial_id(1);
  batch.set_agent_id("agent-0");
  batch.set_sequence(sequence);
  DeclareRealisticSeries(batch);
  for (int r = 0; r < kReportsPerBatch; ++r) {
    AddRealisticReport(batch, start + absl::Seconds(r), sequence * 100 + r);
  }
  return batch;
}

// A stream opened on `server`; `acked` is what the server said it has.
struct OpenStream {
  std::unique_ptr<v1::IngestService::Stub> stub;
  std::unique_ptr<grpc::ClientContext> context;
  std::unique_ptr<Stream> stream;
  int64_t acked = -1;
};

OpenStream Open(const TestServer& server, const std::string& stream_id) {
  OpenStream s;
  s.stub = v1::IngestService::NewStub(server.Channel());
  s.context = std::make_unique<grpc::ClientContext>();
  s.stream = s.stub->StreamSystemMetrics(s.context.get());
  v1::StreamSystemMetricsRequest open;
  open.mutable_open()->set_stream_id(stream_id);
  open.mutable_open()->set_trial_id(1);
  v1::StreamSystemMetricsResponse response;
  if (s.stream->Write(open) && s.stream->Read(&response)) {
    s.acked = response.acked_sequence();
  }
  return s;
}

bool Send(OpenStream& s, const v1::SystemMetricsBatch& batch) {
  v1::StreamSystemMetricsRequest request;
  *request.mutable_batch() = batch;
  return s.stream->Write(request);
}

int64_t Scalar(const std::string& url, const std::string& sql) {
  absl::StatusOr<std::string> text = pgtest::QueryScalar(url, sql);
  int64_t n = -1;
  if (!text.ok() || !absl::SimpleAtoi(*text, &n)) {
    ADD_FAILURE() << sql << ": " << (text.ok() ? *text : text.status().ToString());
  }
  return n;
}

// Waits until `n` backends of the database wait for a lock.
bool AwaitWaitingWriters(const std::string& url, int n) {
  return test_util::Eventually(
      [&] {
        return Scalar(url,
                      "SELECT count(*) FROM pg_stat_activity WHERE datname = "
                      "current_database() AND wait_event_type = 'Lock'") >= n;
      },
      absl::Seconds(20));
}

// `batches` batches of one agent's reports, every second report time from
// `first`: two streams of the same agent interleave in the same buckets.
std::vector<v1::SystemMetricsBatch> AgentBatches(const std::string& agent,
                                                 absl::Time first,
                                                 int batches) {
  std::vector<v1::SystemMetricsBatch> out;
  for (int b = 0; b < batches; ++b) {
    v1::SystemMetricsBatch batch;
    batch.set_trial_id(1);
    batch.set_agent_id(agent);
    DeclareRealisticSeries(batch);
    for (int r = 0; r < kReportsPerBatch; ++r) {
      const int i = b * kReportsPerBatch + r;
      AddRealisticReport(batch, first + absl::Seconds(2 * i), i);
    }
    out.push_back(std::move(batch));
  }
  return out;
}

class SeveralServersTest : public ::testing::Test {
 protected:
  void SetUp() override { StartServers({}); }

  void StartServers(const server::ServerOptions& options) {
    b_.reset();
    a_.reset();
    ASSERT_OK_AND_ASSIGN(a_, TestServer::Start(options));
    ASSERT_OK_AND_ASSIGN(b_, a_->StartReplica(options));
    ASSERT_OK(CreateTrial(a_->Channel(), 1));
  }

  // Sends each stream's batches at once, stream i through server A for
  // even i, B for odd; returns each stream's rejections.
  std::vector<std::vector<v1::BatchRejection>> SendThroughBoth(
      std::vector<std::vector<v1::SystemMetricsBatch>> streams) {
    std::vector<std::vector<v1::BatchRejection>> rejections(streams.size());
    std::vector<std::thread> threads;
    for (size_t i = 0; i < streams.size(); ++i) {
      threads.emplace_back([&, i] {
        const std::string target =
            (i % 2 == 0 ? a_ : b_)->grpc_target();
        StreamerOptions options;
        options.stream_id = absl::StrCat("stream-", i);
        options.trial_id = 1;
        options.window = 4;
        ResendingStreamer streamer([&] { return target; }, options);
        EXPECT_OK(streamer.SendAll(std::move(streams[i])));
        rejections[i] = streamer.rejections();
      });
    }
    for (auto& t : threads) t.join();
    return rejections;
  }
  void TearDown() override {
    b_.reset();  // the replica first: the database goes with `a_`
    a_.reset();
  }

  const std::string& url() const { return a_->database_url(); }

  // Sends `batch` through server A and leaves A committing it, stalled at
  // its stream position while the test holds that table; the client gives up on A
  // (its stream cancelled, as when a load balancer drops the connection),
  // reconnects to B and resends from its last acknowledgement. Then A is
  // let go. Returns B's acknowledgement of the resent batch.
  void ResendWhileAIsCommitting(const v1::SystemMetricsBatch& batch,
                                int64_t acked_before) {
    ASSERT_OK_AND_ASSIGN(auto lock, pgtest::IngestLock::Take(url()));
    OpenStream on_a = Open(*a_, "moving");
    ASSERT_EQ(on_a.acked, acked_before);
    ASSERT_TRUE(Send(on_a, batch));
    ASSERT_TRUE(AwaitWaitingWriters(url(), 1)) << "A never reached its commit";
    on_a.context->TryCancel();

    OpenStream on_b = Open(*b_, "moving");
    // A has not committed: B has what was there before.
    ASSERT_EQ(on_b.acked, acked_before);
    ASSERT_TRUE(Send(on_b, batch));
    // B's commit of the same batch is under way too (waiting for A's stream
    // lock; before that lock existed, for the locked table, rows written).
    ASSERT_TRUE(AwaitWaitingWriters(url(), 2)) << "B never reached its commit";
    lock.reset();

    v1::StreamSystemMetricsResponse response;
    ASSERT_TRUE(on_b.stream->Read(&response));
    EXPECT_EQ(response.acked_sequence(), batch.sequence());
    EXPECT_THAT(response.rejected(), ::testing::IsEmpty());
    on_b.stream->WritesDone();
    while (on_b.stream->Read(&response)) {
    }
    EXPECT_TRUE(on_b.stream->Finish().ok());
  }

  void ExpectStoredOnce(int batches) {
    EXPECT_EQ(Scalar(url(), "SELECT count(*) FROM metrics WHERE trial_id = 1"),
              batches * kReportsPerBatch);
    ASSERT_OK_AND_ASSIGN(int64_t values, pgtest::CountRawValues(url(), 1));
    EXPECT_EQ(values, batches * kReportsPerBatch * kRealisticValuesPerReport);
    ASSERT_OK_AND_ASSIGN(int64_t repeated, pgtest::CountRepeatedReports(url(), 1));
    EXPECT_EQ(repeated, 0);
    EXPECT_OK(pgtest::CheckRollupsMatchRawRows(url(), 1).status());
    EXPECT_EQ(Scalar(url(),
                     "SELECT last_sequence FROM ingest_positions WHERE "
                     "trial_id = 1 AND stream_id = 'moving'"),
              batches);
  }

  std::unique_ptr<TestServer> a_, b_;
};

// The stream's first batch: no position is stored yet, so nothing but a
// lock on the stream itself can make B wait for A.
TEST_F(SeveralServersTest, AZombieCommittingANewStreamsFirstBatchDoesNotDoubleIt) {
  const absl::Time start = absl::Now() - absl::Hours(1);
  ResendWhileAIsCommitting(Batch(1, start), 0);
  ExpectStoredOnce(1);
}

TEST_F(SeveralServersTest, AZombieCommittingALaterBatchDoesNotDoubleIt) {
  const absl::Time start = absl::Now() - absl::Hours(1);
  {
    OpenStream on_a = Open(*a_, "moving");
    ASSERT_TRUE(Send(on_a, Batch(1, start)));
    v1::StreamSystemMetricsResponse response;
    ASSERT_TRUE(on_a.stream->Read(&response));
    ASSERT_EQ(response.acked_sequence(), 1);
    on_a.stream->WritesDone();
    while (on_a.stream->Read(&response)) {
    }
    ASSERT_TRUE(on_a.stream->Finish().ok());
  }
  ResendWhileAIsCommitting(Batch(2, start + absl::Seconds(kReportsPerBatch)), 1);
  ExpectStoredOnce(2);
}

// Each agent has a stream through A and one through B at once, their
// reports interleaved in the same rollup buckets and declaring the same
// series: the series are registered once, and every bucket holds both.
// A ReportTrialMetrics body of the platform's harness: one agent's cpu
// group at `time`.
std::string HarnessReport(absl::Time time) {
  return absl::StrCat(
      R"({"metrics": {"metrics": {"avgMetrics": {"node-1": {"cpu_util_simple": 12.5}}, )",
      R"("batchMetrics": null}, "trialId": 1, "trialRunId": 1, "stepsCompleted": null, )",
      R"("reportTime": ")", absl::FormatTime("%Y-%m-%dT%H:%M:%E6S+00:00", time, absl::UTCTimeZone()),
      R"("}, "group": "cpu"})");
}

// The harness retries a POST whose answer it lost; behind a load balancer
// the copy may reach the other server while the first still commits.
TEST_F(SeveralServersTest, CopiesOfAHarnessReportOnBothServersAreStoredOnce) {
  const absl::Time t0 = absl::Now() - absl::Minutes(5);
  auto post = [](TestServer& server, const std::string& body) {
    absl::StatusOr<HttpResult> r =
        HttpCall(server.http_port(), "POST", "/api/v1/trials/1/metrics", body,
                 absl::Seconds(30));
    EXPECT_OK(r.status());
    if (r.ok()) {
      EXPECT_EQ(r->status, 200) << r->body;
    }
  };
  // A stalled in its commit (the test holds the stream positions) while B's copy
  // waits for the report's stream.
  {
    ASSERT_OK_AND_ASSIGN(auto lock, pgtest::IngestLock::Take(url()));
    const std::string body = HarnessReport(t0);
    std::thread on_a([&] { post(*a_, body); });
    ASSERT_TRUE(AwaitWaitingWriters(url(), 1)) << "A never reached its commit";
    std::thread on_b([&] { post(*b_, body); });
    ASSERT_TRUE(AwaitWaitingWriters(url(), 2)) << "B never reached its commit";
    lock.reset();
    on_a.join();
    on_b.join();
  }
  // And at the same moment, round after round.
  for (int i = 1; i <= 20; ++i) {
    const std::string body = HarnessReport(t0 + absl::Seconds(10 * i));
    std::thread on_a([&] { post(*a_, body); });
    std::thread on_b([&] { post(*b_, body); });
    on_a.join();
    on_b.join();
  }
  EXPECT_EQ(Scalar(url(), "SELECT count(*) FROM metrics WHERE trial_id = 1"), 21);
  ASSERT_OK_AND_ASSIGN(int64_t repeated, pgtest::CountRepeatedReports(url(), 1));
  EXPECT_EQ(repeated, 0);
  EXPECT_OK(pgtest::CheckRollupsMatchRawRows(url(), 1).status());
}

TEST_F(SeveralServersTest, TwoServersWritingTheSameAgentsKeepRollupsExact) {
  constexpr int kAgents = 3, kBatches = 30;
  const absl::Time start = absl::Now() - absl::Hours(2);
  std::vector<std::vector<v1::SystemMetricsBatch>> streams;
  for (int agent = 0; agent < kAgents; ++agent) {
    const std::string id = absl::StrCat("agent-", agent);
    streams.push_back(AgentBatches(id, start, kBatches));
    streams.push_back(AgentBatches(id, start + absl::Seconds(1), kBatches));
  }
  for (const auto& rejected : SendThroughBoth(std::move(streams))) {
    EXPECT_THAT(rejected, ::testing::IsEmpty());
  }
  ASSERT_OK_AND_ASSIGN(int64_t values, pgtest::CountRawValues(url(), 1));
  EXPECT_EQ(values, 2 * kAgents * kBatches * kReportsPerBatch *
                        kRealisticValuesPerReport);
  ASSERT_OK_AND_ASSIGN(int64_t repeated, pgtest::CountRepeatedReports(url(), 1));
  EXPECT_EQ(repeated, 0);
  ASSERT_OK_AND_ASSIGN(int64_t buckets, pgtest::CheckRollupsMatchRawRows(url(), 1));
  EXPECT_GT(buckets, 0);
  EXPECT_EQ(Scalar(url(), "SELECT count(*) FROM series WHERE trial_id = 1"),
            kAgents * kRealisticValuesPerReport);
  EXPECT_EQ(Scalar(url(), "SELECT series_count FROM trial_series_counts "
                          "WHERE trial_id = 1"),
            kAgents * kRealisticValuesPerReport);
}

// New agents race through both servers for a series limit that fits only
// some of them: exactly as many as fit are stored, the rest refused.
TEST_F(SeveralServersTest, TwoServersFillTheSeriesLimitExactly) {
  constexpr int kAgents = 8, kFit = 3;
  server::ServerOptions options;
  options.store.limits.max_series_per_trial = kFit * kRealisticValuesPerReport;
  StartServers(options);
  const absl::Time start = absl::Now() - absl::Hours(1);
  std::vector<std::vector<v1::SystemMetricsBatch>> streams;
  for (int agent = 0; agent < kAgents; ++agent) {
    streams.push_back(AgentBatches(absl::StrCat("agent-", agent), start, 1));
  }
  int refused = 0;
  for (const auto& rejected : SendThroughBoth(std::move(streams))) {
    for (const v1::BatchRejection& r : rejected) {
      EXPECT_EQ(r.code(), static_cast<int>(grpc::StatusCode::RESOURCE_EXHAUSTED))
          << r.message();
      ++refused;
    }
  }
  EXPECT_EQ(refused, kAgents - kFit);
  EXPECT_EQ(Scalar(url(), "SELECT count(*) FROM series WHERE trial_id = 1"),
            kFit * kRealisticValuesPerReport);
  EXPECT_EQ(Scalar(url(), "SELECT series_count FROM trial_series_counts "
                          "WHERE trial_id = 1"),
            kFit * kRealisticValuesPerReport);
  EXPECT_EQ(Scalar(url(), "SELECT count(DISTINCT agent_id) FROM metrics "
                          "WHERE trial_id = 1"),
            kFit);
}

// Two metricsd processes on one database: a follower on B gets each point
// committed through A within a second of A's acknowledgement (B learns of
// the commit from PostgreSQL's NOTIFY, not from A).
TEST(ReplicaProcessesTest, FollowOnOneServerSeesWhatAnotherCommitsWithinASecond) {
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<TestDatabase> db, TestDatabase::Create());
  auto start = [&] {
    return StartMetricsd({METRICSD_PATH, "--database-url=" + db->url(),
                          "--grpc-address=127.0.0.1:0",
                          "--http-address=127.0.0.1:0", "--auth=off"});
  };
  ASSERT_OK_AND_ASSIGN(MetricsdProcess a, start());
  ASSERT_OK_AND_ASSIGN(MetricsdProcess b, start());
  auto channel = [](const MetricsdProcess& p) {
    return grpc::CreateChannel(p.grpc_target, grpc::InsecureChannelCredentials());
  };
  ASSERT_OK(CreateTrial(channel(a), 1));

  auto query = v1::QueryService::NewStub(channel(b));
  grpc::ClientContext follow_context;
  follow_context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(60)));
  v1::QuerySeriesRequest request;
  request.set_trial_id(1);
  auto follow = query->FollowSeries(&follow_context, request);
  v1::QuerySeriesResponse message;
  ASSERT_TRUE(follow->Read(&message));  // the current answer: nothing yet
  EXPECT_EQ(message.series_size(), 0);

  auto ingest = v1::IngestService::NewStub(channel(a));
  const absl::Time first = absl::Now() - absl::Minutes(5);
  for (int i = 0; i < 3; ++i) {
    const double value = 10 + i;
    v1::ReportSystemMetricsRequest report;
    v1::SystemMetricsBatch& batch = *report.mutable_batch();
    batch.set_trial_id(1);
    batch.set_agent_id("agent-0");
    batch.add_series()->set_name("cpu_util_simple");
    v1::SystemMetricsReport& r = *batch.add_reports();
    r.mutable_time()->set_seconds(absl::ToUnixSeconds(first + absl::Seconds(20 * i)));
    r.add_series(0);
    r.add_values(value);
    grpc::ClientContext context;
    v1::ReportSystemMetricsResponse response;
    ASSERT_TRUE(ingest->ReportSystemMetrics(&context, report, &response).ok());
    const absl::Time acknowledged = absl::Now();

    ASSERT_TRUE(follow->Read(&message));
    EXPECT_LT(absl::Now() - acknowledged, absl::Seconds(1)) << "point " << i;
    ASSERT_EQ(message.series_size(), 1);
    EXPECT_THAT(message.series(0).max(), ::testing::ElementsAre(value));
  }
  follow_context.TryCancel();
  while (follow->Read(&message)) {
  }
}

}  // namespace
}  // namespace metrics::test_util
