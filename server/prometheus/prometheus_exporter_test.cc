// GET /metrics of the real server in-process: the service's own statistics and
// the latest values of active trials in valid Prometheus text (checked by
// promtool, from Debian's prometheus package), with the cardinality cap.
#include "server/prometheus/prometheus_exporter.h"

#include <cstdio>
#include <fstream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/testing/eventually.h"
#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "proto/metrics/v1/ingest.grpc.pb.h"
#include "proto/metrics/v1/query.grpc.pb.h"
#include "tests/testing/http_client.h"
#include "tests/testing/test_server.h"
#include "tests/testing/trials.h"

namespace metrics::server {
namespace {

using ::metrics::test_util::HttpCall;
using ::metrics::test_util::HttpResult;
using ::metrics::test_util::TestServer;
using ::testing::HasSubstr;
using ::testing::Not;

// Reports minutes old still count as current (most tests write into one
// past rollup bucket).
ServerOptions LongStaleWindow() {
  ServerOptions options;
  options.stale_after = absl::Hours(1);
  return options;
}

class PrometheusExporterTest : public ::testing::Test {
 protected:
  void Start(ServerOptions options = LongStaleWindow()) {
    ASSERT_OK_AND_ASSIGN(server_, TestServer::Start(options));
  }

  void CreateTrial(int32_t id) {
    ASSERT_OK(test_util::CreateTrial(server_->Channel(), id));
  }
  void EndTrial(int32_t id) {
    ASSERT_OK(test_util::CompleteTrial(server_->Channel(), id));
  }

  // One report of the given (name, gpu, unit, value) series at `time`;
  // with a stream id, as that stream's batch `sequence`. The call's status.
  grpc::Status TryReport(
      int32_t trial, absl::Time time,
      std::vector<std::tuple<std::string, std::string, std::string, double>>
          values,
      const std::string& stream_id = "", int64_t sequence = 0) {
    v1::ReportSystemMetricsRequest request;
    request.set_stream_id(stream_id);
    request.mutable_batch()->set_sequence(sequence);
    v1::SystemMetricsBatch* batch = request.mutable_batch();
    batch->set_trial_id(trial);
    batch->set_agent_id(agent_id_);
    v1::SystemMetricsReport* report = batch->add_reports();
    report->mutable_time()->set_seconds(absl::ToUnixSeconds(time));
    for (const auto& [name, gpu, unit, value] : values) {
      v1::SeriesDeclaration* d = batch->add_series();
      d->set_name(name);
      d->set_gpu_uuid(gpu);
      d->set_unit(unit);
      report->add_series(batch->series_size() - 1);
      report->add_values(value);
    }
    auto stub = v1::IngestService::NewStub(server_->Channel());
    grpc::ClientContext context;
    v1::ReportSystemMetricsResponse response;
    return stub->ReportSystemMetrics(&context, request, &response);
  }

  void Report(int32_t trial, absl::Time time,
              std::vector<std::tuple<std::string, std::string, std::string,
                                     double>> values) {
    const grpc::Status status = TryReport(trial, time, std::move(values));
    ASSERT_TRUE(status.ok()) << status.error_message();
  }

  std::string Scrape() {
    absl::StatusOr<HttpResult> r = HttpCall(server_->http_port(), "GET", "/metrics");
    EXPECT_OK(r);
    if (!r.ok()) return "";
    EXPECT_EQ(r->status, 200);
    EXPECT_EQ(r->headers["content-type"],
              "text/plain; version=0.0.4; charset=utf-8");
    return r->body;
  }

  std::unique_ptr<TestServer> server_;
  std::string agent_id_ = "host-a";  // of the next reports
};

// promtool's verdict on `text`: its output, "" when it has nothing to say.
std::string Promtool(const std::string& text) {
  const std::string path =
      absl::StrCat(::testing::TempDir(), "/metrics_", getpid(), ".txt");
  std::ofstream(path) << text;
  FILE* p = popen(absl::StrCat("promtool check metrics < ", path, " 2>&1").c_str(),
                  "r");
  std::string out;
  char buffer[4096];
  while (p != nullptr && fgets(buffer, sizeof buffer, p) != nullptr) out += buffer;
  const int code = p == nullptr ? -1 : pclose(p);
  std::remove(path.c_str());
  return code == 0 ? out : absl::StrCat("exit ", code, ": ", out);
}

TEST_F(PrometheusExporterTest, ServiceStatisticsAndLatestValuesOfActiveTrials) {
  Start();
  CreateTrial(1);
  CreateTrial(2);
  // Both reports in one finest (10 s) rollup bucket: the page exports the
  // series of each agent's newest bucket, and a series missing from it has
  // gone quiet.
  const absl::Time t = absl::FromUnixSeconds(
      (absl::ToUnixSeconds(absl::Now() - absl::Minutes(5)) / 10) * 10 + 2);
  Report(1, t, {{"gpu_util", "GPU-0", "percent", 10},
                {"memory_free", "", "bytes", 1000}});
  // The newest value is the one exported.
  Report(1, t + absl::Seconds(1),
         {{"gpu_util", "GPU-0", "percent", 50},
          {"net_throughput_sent", "", "bytes/s", 125},
          {"tokens.per-second", "", "tokens/s", 7}});
  Report(2, t, {{"gpu_util", "GPU-0", "percent", 99}});
  EndTrial(2);
  {
    auto stub = v1::QueryService::NewStub(server_->Channel());
    grpc::ClientContext context;
    v1::QuerySeriesRequest request;
    request.set_trial_id(1);
    v1::QuerySeriesResponse response;
    ASSERT_TRUE(stub->QuerySeries(&context, request, &response).ok());
  }

  const std::string text = Scrape();
  EXPECT_EQ(Promtool(text), "");
  EXPECT_THAT(text, HasSubstr("\nmetricsd_ingested_samples_total 6\n"));
  EXPECT_THAT(text, HasSubstr("\nmetricsd_ingested_batches_total{outcome=\"stored\"} 3\n"));
  EXPECT_THAT(text, HasSubstr("\nmetricsd_batch_commit_seconds_count 3\n"));
  // Every unary method's latency, whichever service: the query, and the
  // two trials made and the one ended.
  EXPECT_THAT(text, HasSubstr("\nmetricsd_call_seconds_count{rpc=\"QuerySeries\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("\nmetricsd_call_seconds_count{rpc=\"CreateTrial\"} 2\n"));
  EXPECT_THAT(text, HasSubstr("\nmetricsd_call_seconds_count{rpc=\"UpdateTrial\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("\nmetricsd_call_seconds_count{rpc=\"ListSeries\"} 0\n"));
  EXPECT_THAT(text, HasSubstr("\nmetricsd_open_streams{rpc=\"StreamSystemMetrics\"} 0\n"));
  EXPECT_THAT(text, HasSubstr("\nmetricsd_ingest_queue_values 0\n"));
  EXPECT_THAT(text, HasSubstr("# TYPE metricsd_legacy_calls_total counter\n"));
  EXPECT_THAT(text, HasSubstr(
      "\nprofiler_gpu_util_ratio{trial_id=\"1\",agent_id=\"host-a\","
      "gpu_uuid=\"GPU-0\"} 0.5\n"));
  EXPECT_THAT(text, HasSubstr(
      "\nprofiler_memory_free_bytes{trial_id=\"1\",agent_id=\"host-a\","
      "gpu_uuid=\"\"} 1000\n"));
  EXPECT_THAT(text, HasSubstr(
      "\nprofiler_net_throughput_sent_bytes_per_second{trial_id=\"1\","
      "agent_id=\"host-a\",gpu_uuid=\"\"} 125\n"));
  EXPECT_THAT(text, HasSubstr("\nprofiler_tokens_per_second{trial_id=\"1\""));
  EXPECT_THAT(text, Not(HasSubstr("trial_id=\"2\"")));  // trial 2 ended
  EXPECT_THAT(text, HasSubstr("\nmetricsd_latest_series 4\n"));
  EXPECT_THAT(text, HasSubstr("\nmetricsd_latest_series_truncated 0\n"));
}

// An agent quiet for longer than --stale-after (a crashed host of a trial
// still ACTIVE) leaves the export; when each agent last reported stays.
TEST_F(PrometheusExporterTest, AStaleAgentsSeriesAreNotExportedAsCurrent) {
  ServerOptions options;
  options.stale_after = absl::Minutes(1);
  Start(options);
  CreateTrial(1);
  const absl::Time gone = absl::FromUnixSeconds(
      absl::ToUnixSeconds(absl::Now() - absl::Minutes(5)));
  agent_id_ = "host-gone";
  Report(1, gone, {{"gpu_util", "GPU-0", "percent", 90}});
  agent_id_ = "host-up";
  const absl::Time up = absl::FromUnixSeconds(absl::ToUnixSeconds(absl::Now()));
  Report(1, up, {{"gpu_util", "GPU-0", "percent", 50}});

  const std::string text = Scrape();
  EXPECT_EQ(Promtool(text), "");
  EXPECT_THAT(text, HasSubstr(
      "\nprofiler_gpu_util_ratio{trial_id=\"1\",agent_id=\"host-up\","
      "gpu_uuid=\"GPU-0\"} 0.5\n"));
  EXPECT_THAT(text, Not(HasSubstr("profiler_gpu_util_ratio{trial_id=\"1\","
                                  "agent_id=\"host-gone\"")));
  EXPECT_THAT(text, HasSubstr("\nmetricsd_latest_series 1\n"));
  EXPECT_THAT(text, HasSubstr("\nmetricsd_latest_series_stale 1\n"));
  EXPECT_THAT(text, HasSubstr(absl::StrCat(
      "\nmetricsd_agent_last_sample_timestamp_seconds{trial_id=\"1\","
      "agent_id=\"host-gone\"} ", absl::ToUnixSeconds(gone), "\n")));
  EXPECT_THAT(text, HasSubstr(absl::StrCat(
      "\nmetricsd_agent_last_sample_timestamp_seconds{trial_id=\"1\","
      "agent_id=\"host-up\"} ", absl::ToUnixSeconds(up), "\n")));
}

TEST_F(PrometheusExporterTest, CapBoundsTheExportedSeries) {
  ServerOptions options = LongStaleWindow();
  options.prometheus_max_series = 2;
  Start(options);
  CreateTrial(1);
  Report(1, absl::Now() - absl::Minutes(1),
         {{"alpha", "", "u", 1}, {"beta", "", "u", 2}, {"gamma", "", "u", 3}});
  const std::string text = Scrape();
  EXPECT_EQ(Promtool(text), "");
  EXPECT_THAT(text, HasSubstr("\nmetricsd_latest_series 2\n"));
  EXPECT_THAT(text, HasSubstr("\nmetricsd_latest_series_truncated 1\n"));
  EXPECT_THAT(text, HasSubstr("\nprofiler_alpha{"));
  EXPECT_THAT(text, Not(HasSubstr("\nprofiler_gamma{")));
}

// Agents of trials left ACTIVE after their job died outnumber the live
// ones: the cap applies to the live series, so none of those is dropped and
// nothing is said to be truncated, while each silent agent keeps its last
// sample time (what the silent-agent alert reads).
TEST_F(PrometheusExporterTest, StaleAgentsDoNotUseUpTheCap) {
  ServerOptions options;
  options.stale_after = absl::Minutes(1);
  options.prometheus_max_series = 3;
  Start(options);
  CreateTrial(1);
  const absl::Time gone = absl::FromUnixSeconds(
      absl::ToUnixSeconds(absl::Now() - absl::Minutes(5)));
  for (int i = 0; i < 4; ++i) {
    agent_id_ = absl::StrCat("a-gone-", i);  // read before the live agent
    Report(1, gone, {{"gpu_util", "GPU-0", "percent", 90},
                     {"gpu_util", "GPU-1", "percent", 90}});
  }
  agent_id_ = "z-up";
  const absl::Time up = absl::FromUnixSeconds(absl::ToUnixSeconds(absl::Now()));
  Report(1, up, {{"gpu_util", "GPU-0", "percent", 50},
                 {"gpu_util", "GPU-1", "percent", 25},
                 {"memory_free", "", "bytes", 7}});

  std::string text = Scrape();
  EXPECT_EQ(Promtool(text), "");
  EXPECT_THAT(text, HasSubstr("\nmetricsd_latest_series 3\n"));
  EXPECT_THAT(text, HasSubstr("\nmetricsd_latest_series_stale 8\n"));
  EXPECT_THAT(text, HasSubstr("\nmetricsd_latest_series_truncated 0\n"));
  for (const char* series : {"profiler_gpu_util_ratio{trial_id=\"1\",agent_id=\"z-up\",gpu_uuid=\"GPU-0\"} 0.5\n",
                             "profiler_gpu_util_ratio{trial_id=\"1\",agent_id=\"z-up\",gpu_uuid=\"GPU-1\"} 0.25\n",
                             "profiler_memory_free_bytes{trial_id=\"1\",agent_id=\"z-up\",gpu_uuid=\"\"} 7\n"}) {
    EXPECT_THAT(text, HasSubstr(series));
  }
  EXPECT_THAT(text, Not(HasSubstr("agent_id=\"a-gone-0\",gpu_uuid")));
  for (int i = 0; i < 4; ++i) {
    EXPECT_THAT(text, HasSubstr(absl::StrCat(
        "\nmetricsd_agent_last_sample_timestamp_seconds{trial_id=\"1\","
        "agent_id=\"a-gone-", i, "\"} ", absl::ToUnixSeconds(gone), "\n")));
  }

  // One live series more than the cap: now something live is cut.
  Report(1, up + absl::Seconds(1), {{"gpu_util", "GPU-0", "percent", 50},
                                    {"gpu_util", "GPU-1", "percent", 25},
                                    {"memory_free", "", "bytes", 7},
                                    {"cpu_util_simple", "", "percent", 20}});
  text = Scrape();
  EXPECT_THAT(text, HasSubstr("\nmetricsd_latest_series 3\n"));
  EXPECT_THAT(text, HasSubstr("\nmetricsd_latest_series_truncated 1\n"));
}

TEST_F(PrometheusExporterTest, BatchOutcomesOpenStreamsAndMethods) {
  Start();
  CreateTrial(1);
  // Both reports in one finest (10 s) rollup bucket: the page exports the
  // series of each agent's newest bucket, and a series missing from it has
  // gone quiet.
  const absl::Time t = absl::FromUnixSeconds(
      (absl::ToUnixSeconds(absl::Now() - absl::Minutes(5)) / 10) * 10 + 2);
  ASSERT_TRUE(TryReport(1, t, {{"temp", "", "celsius", 40}}, "s-1", 1).ok());
  ASSERT_TRUE(TryReport(1, t, {{"temp", "", "celsius", 40}}, "s-1", 1).ok());
  // A series keeps its unit: refused.
  EXPECT_EQ(TryReport(1, t, {{"temp", "", "kelvin", 313}}).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);

  // A follow stream, open while the page is read.
  auto stub = v1::QueryService::NewStub(server_->Channel());
  grpc::ClientContext follow;
  v1::QuerySeriesRequest request;
  request.set_trial_id(1);
  auto reader = stub->FollowSeries(&follow, request);
  v1::QuerySeriesResponse first;
  ASSERT_TRUE(reader->Read(&first));

  const std::string text = Scrape();
  EXPECT_EQ(Promtool(text), "");
  EXPECT_THAT(text, HasSubstr("\nmetricsd_ingested_batches_total{outcome=\"stored\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("\nmetricsd_ingested_batches_total{outcome=\"duplicate\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("\nmetricsd_ingested_batches_total{outcome=\"rejected\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("\nmetricsd_ingested_samples_total 1\n"));
  EXPECT_THAT(text, HasSubstr("\nmetricsd_open_streams{rpc=\"FollowSeries\"} 1\n"));
  follow.TryCancel();
  EXPECT_EQ(reader->Finish().error_code(), grpc::StatusCode::CANCELLED);

  absl::StatusOr<HttpResult> post =
      HttpCall(server_->http_port(), "POST", "/metrics");
  ASSERT_OK(post);
  EXPECT_EQ(post->status, 405);
  EXPECT_EQ(post->headers["allow"], "GET, HEAD");
}

// The readiness check says which server --database-url reached: here the
// test's own PostgreSQL, a primary without standbys.
TEST_F(PrometheusExporterTest, TheDatabaseServerReachedIsAPrimary) {
  Start();
  std::string text;
  ASSERT_TRUE(test_util::Eventually(
      [&] {
        text = Scrape();
        return absl::StrContains(text, "\nmetricsd_database_primary 1\n");
      },
      absl::Seconds(10), absl::Milliseconds(200)))
      << text;
  EXPECT_EQ(Promtool(text), "");
  EXPECT_THAT(text, HasSubstr("\nmetricsd_database_sync_standbys 0\n"));
  EXPECT_THAT(text, HasSubstr("\nmetricsd_database_standby_lag_seconds 0\n"));
}

TEST(RenderPrometheusExportTest, AStandbyOrNoServerIsNotAPrimary) {
  ServiceStatistics statistics;
  PrometheusExportInput input;
  input.statistics = &statistics;
  input.latest = absl::UnavailableError("database down");
  input.database.reached = true;  // a standby: no replication figures
  std::string text = RenderPrometheusExport(input);
  EXPECT_EQ(Promtool(text), "");
  EXPECT_THAT(text, HasSubstr("\nmetricsd_database_primary 0\n"));
  EXPECT_THAT(text, Not(HasSubstr("metricsd_database_sync_standbys")));

  input.database = {};  // nothing answered
  text = RenderPrometheusExport(input);
  EXPECT_THAT(text, HasSubstr("\nmetricsd_database_primary 0\n"));

  input.database = {true, true, 1, 0.25};
  text = RenderPrometheusExport(input);
  EXPECT_EQ(Promtool(text), "");
  EXPECT_THAT(text, HasSubstr("\nmetricsd_database_primary 1\n"));
  EXPECT_THAT(text, HasSubstr("\nmetricsd_database_sync_standbys 1\n"));
  EXPECT_THAT(text, HasSubstr("\nmetricsd_database_standby_lag_seconds 0.25\n"));
}

TEST(RenderPrometheusExportTest, LegacyCallsAndAnUnreadableDatabase) {
  ServiceStatistics statistics;
  PrometheusExportInput input;
  input.statistics = &statistics;
  input.legacy_calls = {{"GetTrialProfilerMetrics", 3},
                        {"PostTrialProfilerMetricsBatch", 2}};
  input.latest = absl::UnavailableError("database down");
  input.max_latest_series = 10;
  const std::string text = RenderPrometheusExport(input);
  EXPECT_EQ(Promtool(text), "");
  EXPECT_THAT(text, HasSubstr("\nmetricsd_legacy_calls_total{method=\"GetTrialProfilerMetrics\"} 3\n"));
  EXPECT_THAT(text, HasSubstr("\nmetricsd_legacy_calls_total{method=\"PostTrialProfilerMetricsBatch\"} 2\n"));
  EXPECT_THAT(text, HasSubstr("\nmetricsd_latest_values_up 0\n"));
  EXPECT_THAT(text, Not(HasSubstr("profiler_")));
}

TEST(TrialSeriesNameTest, UnitsBecomePrometheusSuffixes) {
  EXPECT_EQ(TrialSeriesName("gpu_util", "percent").name, "profiler_gpu_util_ratio");
  EXPECT_EQ(TrialSeriesName("gpu_util", "percent").scale, 0.01);
  EXPECT_EQ(TrialSeriesName("memory_free", "bytes").name, "profiler_memory_free_bytes");
  EXPECT_EQ(TrialSeriesName("disk_throughput_read", "bytes/s").name,
            "profiler_disk_throughput_read_bytes_per_second");
  EXPECT_EQ(TrialSeriesName("disk_iops", "operations/s").name, "profiler_disk_iops");
  EXPECT_EQ(TrialSeriesName("gpu_power", "watts").name, "profiler_gpu_power_watts");
  EXPECT_EQ(TrialSeriesName("gpu_temperature", "celsius").name,
            "profiler_gpu_temperature_celsius");
  EXPECT_EQ(TrialSeriesName("gpu_sm_clock", "hertz").name, "profiler_gpu_sm_clock_hertz");
  EXPECT_EQ(TrialSeriesName("9lives.x", "").name, "profiler__9lives_x");
}

}  // namespace
}  // namespace metrics::server
