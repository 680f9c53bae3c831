// OTLP's MetricsService/Export through gRPC against the real server
// in-process on a real PostgreSQL, with tokens required: points stored
// under the service's series, partial success for what is refused (another
// trial's points for a reporter, histograms, points without a trial), and
// the callers refused outright.
#include <grpcpp/create_channel.h>

#include <algorithm>
#include <numeric>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/testing/status_matchers.h"
#include "common/testing/test_time.h"
#include "gmock/gmock.h"
#include "google/rpc/status.pb.h"
#include "gtest/gtest.h"
#include "proto/metrics/v1/query.grpc.pb.h"
#include "proto/opentelemetry/proto/collector/metrics/v1/metrics_service.grpc.pb.h"
#include "storage/pg/pg_metric_store.h"
#include "storage/pg/pg_token_store.h"
#include "tests/testing/http_client.h"
#include "tests/testing/test_server.h"

namespace metrics::server {
namespace {

namespace collector = ::opentelemetry::proto::collector::metrics::v1;
namespace otlp = ::opentelemetry::proto;
using ::metrics::test_util::TestServer;
using ::testing::HasSubstr;

using ::metrics::test_util::Deadline;

// One resource of `trial` and `host` with a gauge "train.loss" of `points`
// points a second apart from a minute ago, and one point of GPU
// utilisation.
void AddResource(collector::ExportMetricsServiceRequest& request, int trial,
                 const std::string& host, int points) {
  auto* rm = request.add_resource_metrics();
  for (const auto& [key, value] :
       {std::pair("trial.id", absl::StrCat(trial)), std::pair("host.name", host)}) {
    auto* kv = rm->mutable_resource()->add_attributes();
    kv->set_key(key);
    kv->mutable_value()->set_string_value(value);
  }
  auto* scope = rm->add_scope_metrics();
  const uint64_t t0 = static_cast<uint64_t>(absl::ToUnixNanos(absl::Now() - absl::Minutes(1)));
  auto* loss = scope->add_metrics();
  loss->set_name("train.loss");
  loss->set_unit("1");
  for (int i = 0; i < points; ++i) {
    auto* p = loss->mutable_gauge()->add_data_points();
    p->set_time_unix_nano(t0 + i * uint64_t{1000000000});
    p->set_as_double(1.0 / (i + 1));
  }
  auto* util = scope->add_metrics();
  util->set_name("DCGM_FI_DEV_GPU_UTIL");
  auto* p = util->mutable_gauge()->add_data_points();
  p->set_time_unix_nano(t0);
  p->set_as_int(97);
  auto* uuid = p->add_attributes();
  uuid->set_key("UUID");
  uuid->mutable_value()->set_string_value("GPU-abc");
}

class OtlpServiceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ServerOptions options;
    options.auth_required = true;
    ASSERT_OK_AND_ASSIGN(server_, TestServer::Start(options));
    storage::pg::PgMetricStoreOptions store_options;
    store_options.database_url = server_->database_url();
    auto store = storage::pg::PgMetricStore::Create(store_options);
    ASSERT_OK(store->CreateTrial(7, Deadline()).status());
    ASSERT_OK(store->CreateTrial(8, Deadline()).status());
    store->Shutdown(Deadline());
    storage::pg::PgTokenStore tokens(server_->database_url());
    for (auto& [secret, role, trial] :
         {std::tuple(&admin_, storage::TokenRole::kAdmin, std::optional<int32_t>()),
          std::tuple(&viewer_, storage::TokenRole::kViewer, std::optional<int32_t>()),
          std::tuple(&reporter_, storage::TokenRole::kReporter, std::optional<int32_t>(7))}) {
      storage::TokenRequest request;
      request.name = "otlp test";
      request.role = role;
      request.trial_id = trial;
      ASSERT_OK_AND_ASSIGN(storage::CreatedToken created, tokens.Create(request, Deadline()));
      *secret = created.secret;
    }
  }

  grpc::Status Export(const collector::ExportMetricsServiceRequest& request,
                      const std::string& token,
                      collector::ExportMetricsServiceResponse* response) {
    auto stub = collector::MetricsService::NewStub(server_->Channel());
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
    if (!token.empty()) context.AddMetadata("authorization", "Bearer " + token);
    return stub->Export(&context, request, response);
  }

  // "name/gpu" -> sample count, of `trial`'s series.
  std::map<std::string, int64_t> Series(int trial) {
    auto stub = v1::QueryService::NewStub(server_->Channel());
    grpc::ClientContext context;
    context.AddMetadata("authorization", "Bearer " + admin_);
    v1::ListSeriesRequest request;
    request.set_trial_id(trial);
    v1::ListSeriesResponse response;
    EXPECT_TRUE(stub->ListSeries(&context, request, &response).ok());
    std::map<std::string, int64_t> series;
    for (const v1::Series& s : response.series()) {
      series[absl::StrCat(s.agent_id(), ":", s.name(), "/", s.gpu_uuid())] = s.sample_count();
    }
    return series;
  }

  std::unique_ptr<TestServer> server_;
  std::string admin_, viewer_, reporter_;
};

TEST_F(OtlpServiceTest, PointsAreStoredUnderTheServicesSeries) {
  collector::ExportMetricsServiceRequest request;
  AddResource(request, 7, "node-1", 5);
  collector::ExportMetricsServiceResponse response;
  const grpc::Status status = Export(request, admin_, &response);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_FALSE(response.has_partial_success());
  EXPECT_EQ(Series(7), (std::map<std::string, int64_t>{{"node-1:train.loss/", 5},
                                                         {"node-1:gpu_util/GPU-abc", 1}}));
}

// A Collector's export of more gauges for one host than one batch may
// declare: stored whole, in as many batches as it takes.
TEST_F(OtlpServiceTest, AnExportPastTheBatchLimitsIsStoredWhole) {
  collector::ExportMetricsServiceRequest request;
  auto* rm = request.add_resource_metrics();
  for (const auto& [key, value] : {std::pair("trial.id", "7"), std::pair("host.name", "host")}) {
    auto* kv = rm->mutable_resource()->add_attributes();
    kv->set_key(key);
    kv->mutable_value()->set_string_value(value);
  }
  auto* scope = rm->add_scope_metrics();
  const uint64_t t = static_cast<uint64_t>(absl::ToUnixNanos(absl::Now() - absl::Minutes(1)));
  for (int i = 0; i < 5000; ++i) {
    auto* g = scope->add_metrics();
    g->set_name(absl::StrCat("app.gauge_", i));
    auto* p = g->mutable_gauge()->add_data_points();
    p->set_time_unix_nano(t);
    p->set_as_double(i);
  }
  collector::ExportMetricsServiceResponse response;
  const grpc::Status status = Export(request, admin_, &response);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_FALSE(response.has_partial_success()) << response.partial_success().error_message();
  const std::map<std::string, int64_t> series = Series(7);
  EXPECT_EQ(series.size(), 5000u);
  EXPECT_EQ(series.at("host:app.gauge_4999/"), 1);
}

// A reporter's points of another trial, a histogram and a resource without
// a trial are refused and counted; the rest is stored.
TEST_F(OtlpServiceTest, PartialSuccessForWhatIsRefused) {
  collector::ExportMetricsServiceRequest request;
  AddResource(request, 7, "node-1", 3);
  AddResource(request, 8, "node-2", 4);
  auto* histogram = request.mutable_resource_metrics(0)->mutable_scope_metrics(0)->add_metrics();
  histogram->set_name("latency");
  histogram->mutable_histogram()->add_data_points();
  request.add_resource_metrics()->add_scope_metrics()->add_metrics()->mutable_gauge()
      ->add_data_points()->set_as_double(1);
  collector::ExportMetricsServiceResponse response;
  const grpc::Status status = Export(request, reporter_, &response);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(response.partial_success().rejected_data_points(), 5 + 1 + 1);
  EXPECT_THAT(response.partial_success().error_message(),
              HasSubstr("trial 8: the token is for trial 7 only"));
  EXPECT_THAT(response.partial_success().error_message(), HasSubstr("latency"));
  EXPECT_THAT(response.partial_success().error_message(), HasSubstr("no trial.id"));
  EXPECT_EQ(Series(7).at("node-1:train.loss/"), 3);
  EXPECT_TRUE(Series(8).empty());
}

TEST_F(OtlpServiceTest, CallersWithoutTheRightAreRefused) {
  collector::ExportMetricsServiceRequest request;
  AddResource(request, 7, "node-1", 1);
  collector::ExportMetricsServiceResponse response;
  EXPECT_EQ(Export(request, "", &response).error_code(), grpc::StatusCode::UNAUTHENTICATED);
  const grpc::Status viewer = Export(request, viewer_, &response);
  EXPECT_EQ(viewer.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_THAT(viewer.error_message(), HasSubstr("only reads"));
  EXPECT_TRUE(Series(7).empty());
}

// POST /v1/metrics: the same through OTLP/HTTP, protobuf and OTLP's JSON,
// answered in the request's encoding; bodies it cannot take refused with
// their HTTP status.
// OTLP has no sequence numbers: a request sent again (an exporter's retry
// after a lost answer) is stored again. Counts double; each bucket's
// minimum, maximum and mean stay those of the values sent, in the rollups
// as in the raw points.
TEST_F(OtlpServiceTest, ARetriedRequestDoublesCountsNotCharts) {
  collector::ExportMetricsServiceRequest request;
  auto* rm = request.add_resource_metrics();
  for (const auto& [key, value] : {std::pair("trial.id", "7"), std::pair("host.name", "node-1")}) {
    auto* kv = rm->mutable_resource()->add_attributes();
    kv->set_key(key);
    kv->mutable_value()->set_string_value(value);
  }
  auto* loss = rm->add_scope_metrics()->add_metrics();
  loss->set_name("train.loss");
  // 360 points 10 s apart over the hour that ended 10 minutes ago, one spike.
  const absl::Time t0 = absl::FromUnixSeconds(
      absl::ToUnixSeconds(absl::Now() - absl::Minutes(70)) / 600 * 600);
  std::vector<double> values;
  for (int i = 0; i < 360; ++i) {
    values.push_back(i == 123 ? 1000 : 2 + (i * 37 % 11) / 4.0);
    auto* p = loss->mutable_gauge()->add_data_points();
    p->set_time_unix_nano(static_cast<uint64_t>(absl::ToUnixNanos(t0 + absl::Seconds(10 * i))));
    p->set_as_double(values.back());
  }
  for (int attempt = 0; attempt < 2; ++attempt) {
    collector::ExportMetricsServiceResponse response;
    const grpc::Status status = Export(request, admin_, &response);
    ASSERT_TRUE(status.ok()) << status.error_message();
    EXPECT_FALSE(response.has_partial_success());
  }
  EXPECT_EQ(Series(7).at("node-1:train.loss/"), 720);

  for (int max_points : {6, 1000}) {  // 10-minute buckets from the rollups; raw
    auto stub = v1::QueryService::NewStub(server_->Channel());
    grpc::ClientContext context;
    context.AddMetadata("authorization", "Bearer " + admin_);
    v1::QuerySeriesRequest query;
    query.set_trial_id(7);
    query.add_name("train.loss");
    query.mutable_start()->set_seconds(absl::ToUnixSeconds(t0));
    query.mutable_end()->set_seconds(absl::ToUnixSeconds(t0 + absl::Hours(1)));
    query.set_max_points(max_points);
    v1::QuerySeriesResponse answer;
    ASSERT_TRUE(stub->QuerySeries(&context, query, &answer).ok());
    ASSERT_EQ(answer.series_size(), 1);
    const v1::SeriesBuckets& b = answer.series(0);
    int64_t total = 0;
    if (max_points == 1000) {  // raw: each point twice, as sent
      EXPECT_EQ(b.resolution_us(), 0);
      for (int i = 0; i < b.bucket_start_us_size(); ++i) {
        const size_t at = static_cast<size_t>(
            (b.bucket_start_us(i) - absl::ToUnixMicros(t0)) / 10000000);
        ASSERT_LT(at, values.size());
        EXPECT_EQ(b.bucket_start_us(i), b.bucket_start_us(i - i % 2)) << "raw " << i;
        EXPECT_EQ(b.min(i), values[at]) << "raw " << i;
        total += b.count(i);
      }
      EXPECT_EQ(total, 720);
      continue;
    }
    ASSERT_EQ(b.resolution_us(), 600000000);
    for (int i = 0; i < b.bucket_start_us_size(); ++i) {
      const auto begin = values.begin() + 60 * i, end = begin + 60;
      EXPECT_EQ(b.bucket_start_us(i), absl::ToUnixMicros(t0 + absl::Minutes(10 * i)));
      EXPECT_EQ(b.count(i), 120) << "bucket " << i;
      EXPECT_EQ(b.min(i), *std::min_element(begin, end)) << "bucket " << i;
      EXPECT_EQ(b.max(i), *std::max_element(begin, end)) << "bucket " << i;
      EXPECT_DOUBLE_EQ(b.mean(i), std::accumulate(begin, end, 0.0) / 60) << "bucket " << i;
      total += b.count(i);
    }
    EXPECT_EQ(total, 720) << max_points;
  }
}

TEST_F(OtlpServiceTest, OtlpHttpTakesProtobufAndJson) {
  collector::ExportMetricsServiceRequest request;
  AddResource(request, 7, "node-1", 2);
  AddResource(request, 8, "node-2", 1);
  const std::string auth = "Authorization: Bearer " + reporter_ + "\r\n";
  ASSERT_OK_AND_ASSIGN(
      test_util::HttpResult proto,
      test_util::HttpCall(server_->http_port(), "POST", "/v1/metrics",
                          request.SerializeAsString(), absl::Seconds(30),
                          auth + "Content-Type: application/x-protobuf\r\n"));
  ASSERT_EQ(proto.status, 200) << proto.body;
  EXPECT_EQ(proto.headers["content-type"], "application/x-protobuf");
  collector::ExportMetricsServiceResponse answer;
  ASSERT_TRUE(answer.ParseFromString(proto.body));
  EXPECT_EQ(answer.partial_success().rejected_data_points(), 2);  // trial 8's

  const std::string json = absl::StrCat(
      R"({"resourceMetrics":[{"resource":{"attributes":[)",
      R"({"key":"trial.id","value":{"intValue":"7"}},{"key":"host.name","value":{"stringValue":"node-3"}}]},)",
      R"("scopeMetrics":[{"metrics":[{"name":"train.loss","unit":"1","gauge":{"dataPoints":[)",
      R"({"timeUnixNano":")", absl::ToUnixNanos(absl::Now() - absl::Minutes(1)),
      R"(","asDouble":0.25,"flags":0,"unknownField":true}]}}]}]}]})");
  ASSERT_OK_AND_ASSIGN(
      test_util::HttpResult plain,
      test_util::HttpCall(server_->http_port(), "POST", "/v1/metrics", json,
                          absl::Seconds(30), auth + "Content-Type: application/json\r\n"));
  ASSERT_EQ(plain.status, 200) << plain.body;
  EXPECT_EQ(plain.body, "{}");
  EXPECT_EQ(Series(7).at("node-3:train.loss/"), 1);

  for (const auto& [headers, body, status] :
       {std::tuple(std::string("Content-Type: text/plain\r\n"), std::string("x"), 415),
        std::tuple(std::string("Content-Type: application/x-protobuf\r\n"),
                   request.SerializeAsString().substr(0, 20), 400),
        std::tuple(std::string("Content-Type: application/json\r\nContent-Encoding: gzip\r\n"),
                   std::string("not gzip"), 400)}) {
    ASSERT_OK_AND_ASSIGN(test_util::HttpResult refused,
                         test_util::HttpCall(server_->http_port(), "POST", "/v1/metrics",
                                             body, absl::Seconds(30), auth + headers));
    EXPECT_EQ(refused.status, status) << headers << refused.body;
    // The error in the request's encoding, as OTLP's specification asks.
    if (absl::StrContains(headers, "x-protobuf")) {
      EXPECT_EQ(refused.headers["content-type"], "application/x-protobuf");
      google::rpc::Status error;
      ASSERT_TRUE(error.ParseFromString(refused.body)) << refused.body;
      EXPECT_EQ(error.code(), static_cast<int>(absl::StatusCode::kInvalidArgument));
      EXPECT_THAT(error.message(), HasSubstr("not an OTLP ExportMetricsServiceRequest"));
    } else {
      EXPECT_THAT(refused.body, HasSubstr("\"code\":"));
    }
  }
  ASSERT_OK_AND_ASSIGN(test_util::HttpResult get,
                       test_util::HttpCall(server_->http_port(), "GET", "/v1/metrics"));
  EXPECT_EQ(get.status, 405);
  ASSERT_OK_AND_ASSIGN(
      test_util::HttpResult anonymous,
      test_util::HttpCall(server_->http_port(), "POST", "/v1/metrics", json,
                          absl::Seconds(30), "Content-Type: application/json\r\n"));
  EXPECT_EQ(anonymous.status, 401);
  // A stranger is refused before the body is looked at (no inflating for
  // strangers); a viewer too.
  ASSERT_OK_AND_ASSIGN(
      test_util::HttpResult stranger,
      test_util::HttpCall(server_->http_port(), "POST", "/v1/metrics", "not gzip",
                          absl::Seconds(30),
                          "Content-Type: application/x-protobuf\r\nContent-Encoding: gzip\r\n"));
  EXPECT_EQ(stranger.status, 401) << stranger.body;
  google::rpc::Status unauthenticated;
  ASSERT_TRUE(unauthenticated.ParseFromString(stranger.body));
  EXPECT_EQ(unauthenticated.code(), static_cast<int>(absl::StatusCode::kUnauthenticated));
  ASSERT_OK_AND_ASSIGN(
      test_util::HttpResult viewer,
      test_util::HttpCall(server_->http_port(), "POST", "/v1/metrics", json, absl::Seconds(30),
                          "Authorization: Bearer " + viewer_ + "\r\n"));
  EXPECT_EQ(viewer.status, 403) << viewer.body;
}

}  // namespace
}  // namespace metrics::server
