// Backup and restore as docs/operating.md ("Backup and restore") tells an
// operator to do it, on a real PostgreSQL with WAL archiving
// (ArchivedCluster): three agents stream; a base backup is taken while they
// do; a restore point is made; they stream on; the database is lost and
// restored to the point. metricsd on the restored database answers the
// charts it answered at the point, bit for bit, and its stream positions are
// those of then: agents that still hold their batches resend from there, and
// the charts then equal the original's final ones, every sample once.
#include <google/protobuf/util/message_differencer.h>
#include <grpcpp/client_context.h>

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/status_macros.h"
#include "common/testing/status_matchers.h"
#include "gtest/gtest.h"
#include "proto/metrics/v1/query.grpc.pb.h"
#include "tests/testing/archived_cluster.h"
#include "tests/testing/realistic_batch.h"
#include "tests/testing/resending_streamer.h"
#include "tests/testing/test_server.h"
#include "tests/testing/trials.h"

namespace metrics::test_util {
namespace {

using ::google::protobuf::util::MessageDifferencer;

constexpr int kBackupAgents = 3;
constexpr int kBackupBatches = 30;  // an agent's, in three parts of 10
constexpr int kBackupReportsPerBatch = 10;
const absl::Time kBackupStart = absl::FromUnixSeconds(1'790'000'000);

// Agent `agent`'s batches, a report a second.
std::vector<v1::SystemMetricsBatch> AgentBatches(int agent) {
  std::vector<v1::SystemMetricsBatch> batches(kBackupBatches);
  for (int b = 0; b < kBackupBatches; ++b) {
    v1::SystemMetricsBatch& batch = batches[b];
    batch.set_trial_id(1);
    batch.set_agent_id(absl::StrCat("node-", agent));
    DeclareRealisticSeries(batch, absl::StrCat(agent, "-"));
    for (int r = 0; r < kBackupReportsPerBatch; ++r) {
      const int i = b * kBackupReportsPerBatch + r;
      AddRealisticReport(batch, kBackupStart + absl::Seconds(i), agent * 100000 + i);
    }
  }
  return batches;
}

// Every agent sends its first `count` batches on its stream (all it has
// sent before included: the stream resumes after the server's position).
absl::Status StreamReports(const std::string& target, int count) {
  std::vector<std::thread> agents;
  std::vector<absl::Status> results(kBackupAgents);
  for (int a = 0; a < kBackupAgents; ++a) {
    agents.emplace_back([&, a] {
      std::vector<v1::SystemMetricsBatch> batches = AgentBatches(a);
      batches.resize(count);
      StreamerOptions options;
      options.stream_id = absl::StrCat("agent-", a);
      options.trial_id = 1;
      ResendingStreamer streamer([&] { return target; }, options);
      results[a] = streamer.SendAll(std::move(batches));
    });
  }
  for (std::thread& t : agents) t.join();
  for (const absl::Status& r : results) RETURN_IF_ERROR(r);
  return absl::OkStatus();
}

// Trial 1's whole run, every column of every bucket, as a chart of 100
// points and as raw points (the last hour at most: all of it here).
absl::StatusOr<std::vector<v1::QuerySeriesResponse>> Charts(TestServer& server) {
  auto stub = v1::QueryService::NewStub(server.Channel());
  std::vector<v1::QuerySeriesResponse> charts;
  for (int max_points : {100, 10000}) {
    grpc::ClientContext context;
    context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(30)));
    v1::QuerySeriesRequest request;
    request.set_trial_id(1);
    request.mutable_start()->set_seconds(absl::ToUnixSeconds(kBackupStart));
    request.mutable_end()->set_seconds(
        absl::ToUnixSeconds(kBackupStart) + kBackupBatches * kBackupReportsPerBatch);
    request.set_max_points(max_points);
    const grpc::Status status = stub->QuerySeries(&context, request, &charts.emplace_back());
    if (!status.ok()) {
      return absl::Status(static_cast<absl::StatusCode>(status.error_code()),
                          status.error_message());
    }
  }
  return charts;
}

int64_t Samples(const v1::QuerySeriesResponse& chart) {
  int64_t n = 0;
  for (const auto& series : chart.series()) {
    for (int64_t c : series.count()) n += c;
  }
  return n;
}

void ExpectSameCharts(const std::vector<v1::QuerySeriesResponse>& got,
                      const std::vector<v1::QuerySeriesResponse>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(Samples(got[i]), Samples(want[i]));
    std::string differences;
    MessageDifferencer differ;
    differ.ReportDifferencesToString(&differences);
    EXPECT_TRUE(differ.Compare(got[i], want[i])) << differences.substr(0, 2000);
  }
}

TEST(BackupRestoreTest, APointInTimeRestoreAnswersAsThenAndAgentsFillTheRestExactlyOnce) {
  ASSERT_OK_AND_ASSIGN(auto cluster, ArchivedCluster::Create());
  server::ServerOptions options;
  options.migrate = true;
  ASSERT_OK_AND_ASSIGN(auto original, TestServer::StartOn(cluster->url("postgres"), options));
  ASSERT_OK(CreateTrial(original->Channel(), 1));
  const std::string target = original->grpc_target();
  ASSERT_OK(StreamReports(target, 10));

  // The base backup of the live database, while the agents stream on.
  absl::Status streamed;
  std::thread agents([&] { streamed = StreamReports(target, 20); });
  const absl::Status backed_up = cluster->BaseBackup();
  agents.join();
  ASSERT_OK(backed_up);
  ASSERT_OK(streamed);

  ASSERT_OK(cluster->CreateRestorePoint("before-the-loss"));
  ASSERT_OK_AND_ASSIGN(const std::vector<v1::QuerySeriesResponse> at_the_point,
                       Charts(*original));
  ASSERT_EQ(Samples(at_the_point[1]),
            int64_t{kBackupAgents} * 20 * kBackupReportsPerBatch * kRealisticValuesPerReport);
  ASSERT_OK(StreamReports(target, kBackupBatches));
  ASSERT_OK_AND_ASSIGN(const std::vector<v1::QuerySeriesResponse> at_the_end,
                       Charts(*original));
  original.reset();

  ASSERT_OK(cluster->RestoreTo("before-the-loss"));
  ASSERT_OK_AND_ASSIGN(auto restored, TestServer::StartOn(cluster->url("postgres"), options));
  ASSERT_OK_AND_ASSIGN(const std::vector<v1::QuerySeriesResponse> restored_charts,
                       Charts(*restored));
  ExpectSameCharts(restored_charts, at_the_point);

  // The agents still hold every batch (a client with a spool, or one whose
  // batches were not yet acknowledged): the restored positions say 20, so
  // 21 to 30 go again, once.
  ASSERT_OK(StreamReports(restored->grpc_target(), kBackupBatches));
  ASSERT_OK_AND_ASSIGN(const std::vector<v1::QuerySeriesResponse> refilled,
                       Charts(*restored));
  ExpectSameCharts(refilled, at_the_end);
  EXPECT_EQ(Samples(refilled[1]),
            int64_t{kBackupAgents} * kBackupBatches * kBackupReportsPerBatch * kRealisticValuesPerReport);
}

}  // namespace
}  // namespace metrics::test_util
