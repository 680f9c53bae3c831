// The platform's ReportTrialMetrics and GetMetrics through the real server
// in-process on a real PostgreSQL (its store wrapped to inject faults): a
// full queue or a lost database answers with a retry hint that the
// platform's harness waits out, and the retry stores the report once;
// GetMetrics pages a group trial by trial, over gRPC and REST; /metrics
// counts the reports by outcome.
#include <grpcpp/client_context.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/testing/status_matchers.h"
#include "common/testing/test_time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "proto/determined/api/v1/profiler.grpc.pb.h"
#include "proto/metrics/v1/query.grpc.pb.h"
#include "storage/pg/pg_metric_store.h"
#include "storage/testing/fault_injecting_metric_store.h"
#include "tests/testing/http_client.h"
#include "tests/testing/test_server.h"
#include "tests/testing/trials.h"

namespace metrics::server {
namespace {

using ::metrics::storage::test_util::FaultInjectingMetricStore;
using ::metrics::test_util::HttpCall;
using ::metrics::test_util::HttpResult;
using ::metrics::test_util::TestServer;
using ::testing::HasSubstr;

using ::metrics::test_util::Deadline;

std::string CpuReport(absl::Time time) {
  return absl::StrCat(
      R"({"metrics": {"metrics": {"avgMetrics": {"node-1": {"cpu_util_simple": 12.5}}}, )",
      R"("trialId": 7, "trialRunId": 1, "reportTime": ")",
      absl::FormatTime("%Y-%m-%dT%H:%M:%E6S+00:00", time, absl::UTCTimeZone()),
      R"("}, "group": "cpu"})");
}

class TrialMetricsServiceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_OK_AND_ASSIGN(server_, TestServer::Start(ServerOptions(), [this](auto base) {
                           auto wrapped =
                               std::make_unique<FaultInjectingMetricStore>(std::move(base));
                           store_ = wrapped.get();
                           return wrapped;
                         }));
    ASSERT_OK(test_util::CreateTrial(server_->Channel(), 7));
    ASSERT_OK(test_util::CreateTrial(server_->Channel(), 8));
  }

  HttpResult Post(const std::string& body) {
    absl::StatusOr<HttpResult> r =
        HttpCall(server_->http_port(), "POST", "/api/v1/trials/7/metrics", body);
    EXPECT_OK(r.status());
    return r.ok() ? *r : HttpResult();
  }

  int64_t Samples(absl::string_view name) {
    auto stub = v1::QueryService::NewStub(server_->Channel());
    grpc::ClientContext context;
    v1::ListSeriesRequest request;
    request.set_trial_id(7);
    v1::ListSeriesResponse response;
    EXPECT_TRUE(stub->ListSeries(&context, request, &response).ok());
    for (const v1::Series& s : response.series()) {
      if (s.name() == name) return s.sample_count();
    }
    return 0;
  }

  std::unique_ptr<TestServer> server_;
  FaultInjectingMetricStore* store_ = nullptr;
};

TEST_F(TrialMetricsServiceTest, AFullQueueAsksForARetryAndTheRetryStoresOnce) {
  const std::string body = CpuReport(absl::Now() - absl::Minutes(1));
  store_->FailNextSubmits(1, absl::ResourceExhaustedError("the ingest queue is full"));
  HttpResult busy = Post(body);
  EXPECT_EQ(busy.status, 429) << busy.body;
  // urllib3, the harness's HTTP client, waits this out and posts again.
  EXPECT_EQ(busy.headers["retry-after"], "1");
  store_->FailNextSubmits(1, absl::UnavailableError("the database is unreachable"));
  HttpResult down = Post(body);
  EXPECT_EQ(down.status, 503) << down.body;
  EXPECT_EQ(down.headers["retry-after"], "1");
  EXPECT_EQ(Samples("cpu_util_simple"), 0);
  for (int retry = 0; retry < 2; ++retry) {
    HttpResult stored = Post(body);
    EXPECT_EQ(stored.status, 200) << stored.body;
  }
  EXPECT_EQ(Samples("cpu_util_simple"), 1);
  // A refusal is final: no hint.
  HttpResult refused = Post(R"({"group": "a.b"})");
  EXPECT_EQ(refused.status, 400);
  EXPECT_EQ(refused.headers.count("retry-after"), 0u);

  absl::StatusOr<HttpResult> metrics = HttpCall(server_->http_port(), "GET", "/metrics");
  ASSERT_OK(metrics.status());
  for (const char* line :
       {R"(metricsd_trial_metrics_reports_total{kind="profiling",outcome="failed"} 2)",
        R"(metricsd_trial_metrics_reports_total{kind="profiling",outcome="stored"} 1)",
        R"(metricsd_trial_metrics_reports_total{kind="profiling",outcome="duplicate"} 1)",
        R"(metricsd_trial_metrics_reports_total{kind="generic",outcome="refused"} 1)"}) {
    EXPECT_THAT(metrics->body, HasSubstr(line));
  }
}

TEST_F(TrialMetricsServiceTest, GetMetricsPagesEachTrialsReportsInOrder) {
  storage::pg::PgMetricStoreOptions options;
  options.database_url = server_->database_url();
  auto store = storage::pg::PgMetricStore::Create(options);
  for (int32_t trial : {7, 8}) {
    for (int32_t steps = 1; steps <= (trial == 7 ? 1500 : 2); ++steps) {
      storage::GenericReport r;
      r.trial_id = trial;
      r.run_id = 1;
      r.group = "training";
      r.steps_completed = steps;
      r.avg_metrics = absl::StrCat(R"({"loss": )", 1.0 / steps, "}");
      ASSERT_OK(store->WriteGenericReport(r, Deadline()).status());
    }
  }
  store->Shutdown(Deadline());

  auto stub = determined::api::v1::Determined::NewStub(server_->Channel());
  grpc::ClientContext context;
  determined::api::v1::GetMetricsRequest request;
  request.add_trial_ids(8);
  request.add_trial_ids(7);
  request.set_group("training");
  auto reader = stub->GetMetrics(&context, request);
  determined::api::v1::GetMetricsResponse response;
  std::vector<std::pair<int32_t, int>> messages;  // (trial, reports)
  int32_t last_steps = 0;
  while (reader->Read(&response)) {
    messages.emplace_back(response.metrics(0).trial_id(), response.metrics_size());
    for (const auto& m : response.metrics()) {
      if (m.trial_id() == 7) {
        EXPECT_EQ(m.total_batches(), last_steps + 1);
        last_steps = m.total_batches();
      }
      EXPECT_EQ(m.group(), "training");
      EXPECT_EQ(m.trial_run_id(), 1);
      EXPECT_TRUE(m.metrics().fields().contains("avg_metrics"));
    }
  }
  ASSERT_TRUE(reader->Finish().ok());
  EXPECT_EQ(messages, (std::vector<std::pair<int32_t, int>>{{7, 1000}, {7, 500}, {8, 2}}));

  // Over REST, one NDJSON line a message (the body as sent, chunked).
  absl::StatusOr<HttpResult> rest =
      HttpCall(server_->http_port(), "GET",
               "/api/v1/trials/metrics/trial_metrics?trialIds=7&trialIds=8&group=training");
  ASSERT_OK(rest.status());
  EXPECT_EQ(rest->status, 200);
  std::vector<absl::string_view> lines = absl::StrSplit(rest->body, "{\"result\":");
  EXPECT_EQ(lines.size(), 4u);  // what comes before the first, and three
  EXPECT_THAT(rest->body, HasSubstr(R"("totalBatches":1500,)"));
  // A profiling group has no rows: its values are system series.
  absl::StatusOr<HttpResult> cpu = HttpCall(
      server_->http_port(), "GET", "/api/v1/trials/metrics/trial_metrics?trialIds=7&group=cpu");
  ASSERT_OK(cpu.status());
  EXPECT_EQ(cpu->status, 200);
  EXPECT_THAT(cpu->body, ::testing::Not(HasSubstr("result")));
}

}  // namespace
}  // namespace metrics::server
