// The legacy profiler API (determined.api.v1.Determined) through a stub
// generated from the legacy protos, against the real server and
// PostgreSQL: posted readings come back unchanged (old names, units and
// batch indexes) and show in the new API in the new units; bad batches
// store nothing; follow streams end when the trial does; every answer is
// marked deprecated and counted.
#include <grpcpp/client_context.h>

#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "proto/determined/api/v1/profiler.grpc.pb.h"
#include "proto/metrics/v1/query.grpc.pb.h"
#include "proto/metrics/v1/trials.grpc.pb.h"
#include "server/metrics_server.h"
#include "tests/testing/test_server.h"

namespace metrics::server {
namespace {

using ::determined::api::v1::Determined;
using ::determined::api::v1::GetTrialProfilerAvailableSeriesRequest;
using ::determined::api::v1::GetTrialProfilerAvailableSeriesResponse;
using ::determined::api::v1::GetTrialProfilerMetricsRequest;
using ::determined::api::v1::GetTrialProfilerMetricsResponse;
using ::determined::api::v1::PostTrialProfilerMetricsBatchRequest;
using ::determined::api::v1::PostTrialProfilerMetricsBatchResponse;
using ::determined::trial::v1::TrialProfilerMetricLabels;
using ::determined::trial::v1::TrialProfilerMetricsBatch;
using ::metrics::test_util::TestServer;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::UnorderedElementsAre;

constexpr int32_t kTrial = 7;
const int64_t kStart = absl::ToUnixSeconds(absl::Now()) - 600;

TrialProfilerMetricsBatch Batch(
    const std::string& name, const std::string& gpu,
    std::vector<float> values,
    TrialProfilerMetricLabels::ProfilerMetricType type =
        TrialProfilerMetricLabels::PROFILER_METRIC_TYPE_SYSTEM,
    int64_t first_second = kStart) {
  TrialProfilerMetricsBatch batch;
  for (size_t i = 0; i < values.size(); ++i) {
    batch.add_values(values[i]);
    batch.add_batches(static_cast<int32_t>(100 + i));
    google::protobuf::Timestamp* t = batch.add_timestamps();
    t->set_seconds(first_second + static_cast<int64_t>(i));
    t->set_nanos(250000000);
  }
  TrialProfilerMetricLabels* labels = batch.mutable_labels();
  labels->set_trial_id(kTrial);
  labels->set_name(name);
  labels->set_agent_id("agent-1");
  labels->set_gpu_uuid(gpu);
  labels->set_metric_type(type);
  return batch;
}

class LegacyProfilerServiceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_OK_AND_ASSIGN(server_, TestServer::Start());
    legacy_ = Determined::NewStub(server_->Channel());
    trials_ = v1::TrialService::NewStub(server_->Channel());
    query_ = v1::QueryService::NewStub(server_->Channel());
    grpc::ClientContext context;
    v1::CreateTrialRequest request;
    request.set_id(kTrial);
    v1::Trial trial;
    ASSERT_TRUE(trials_->CreateTrial(&context, request, &trial).ok());
  }

  grpc::Status Post(std::vector<TrialProfilerMetricsBatch> batches,
                    grpc::ClientContext* context = nullptr) {
    grpc::ClientContext own;
    PostTrialProfilerMetricsBatchRequest request;
    for (auto& b : batches) *request.add_batches() = std::move(b);
    PostTrialProfilerMetricsBatchResponse response;
    return legacy_->PostTrialProfilerMetricsBatch(
        context != nullptr ? context : &own, request, &response);
  }

  std::vector<TrialProfilerMetricsBatch> Get(
      const TrialProfilerMetricLabels& filter, grpc::Status* status) {
    grpc::ClientContext context;
    GetTrialProfilerMetricsRequest request;
    *request.mutable_labels() = filter;
    auto reader = legacy_->GetTrialProfilerMetrics(&context, request);
    std::vector<TrialProfilerMetricsBatch> batches;
    GetTrialProfilerMetricsResponse response;
    while (reader->Read(&response)) batches.push_back(response.batch());
    *status = reader->Finish();
    return batches;
  }

  void Complete() {
    grpc::ClientContext context;
    v1::UpdateTrialRequest request;
    request.set_trial_id(kTrial);
    request.set_state(v1::Trial::COMPLETED);
    v1::Trial trial;
    ASSERT_TRUE(trials_->UpdateTrial(&context, request, &trial).ok());
  }

  std::unique_ptr<TestServer> server_;
  std::unique_ptr<Determined::Stub> legacy_;
  std::unique_ptr<v1::TrialService::Stub> trials_;
  std::unique_ptr<v1::QueryService::Stub> query_;
};

TEST_F(LegacyProfilerServiceTest, PostedReadingsComeBackUnchanged) {
  grpc::ClientContext post_context;
  ASSERT_TRUE(Post({Batch("gpu_util", "GPU-0", {10, 20.5f}),
                    Batch("gpu_util", "GPU-1", {90, 80}),
                    Batch("free_memory", "", {1.1f, 2.7f}),
                    Batch("dataloader_next", "", {0.125f},
                          TrialProfilerMetricLabels::PROFILER_METRIC_TYPE_TIMING)},
                   &post_context)
                  .ok());
  const auto& metadata = post_context.GetServerInitialMetadata();
  ASSERT_EQ(metadata.count("deprecation"), 1u);
  EXPECT_EQ(metadata.find("deprecation")->second, "@1795305600");
  EXPECT_THAT(std::string(metadata.find("link")->second.data(),
                          metadata.find("link")->second.size()),
              HasSubstr("/api/v1/trials/7/metrics/system"));

  // A GPU metric asked for without a GPU UUID comes per GPU.
  TrialProfilerMetricLabels filter;
  filter.set_trial_id(kTrial);
  filter.set_name("gpu_util");
  grpc::Status status;
  std::vector<TrialProfilerMetricsBatch> got = Get(filter, &status);
  ASSERT_TRUE(status.ok()) << status.error_message();
  ASSERT_EQ(got.size(), 2u);
  for (const TrialProfilerMetricsBatch& b : got) {
    EXPECT_EQ(b.labels().name(), "gpu_util");
    EXPECT_EQ(b.labels().metric_type(),
              TrialProfilerMetricLabels::PROFILER_METRIC_TYPE_SYSTEM);
    EXPECT_THAT(b.batches(), ElementsAre(100, 101));
    ASSERT_EQ(b.timestamps_size(), 2);
    EXPECT_EQ(b.timestamps(1).seconds(), kStart + 1);
    EXPECT_EQ(b.timestamps(1).nanos(), 250000000);
  }
  EXPECT_THAT(got[0].labels().gpu_uuid(), "GPU-0");
  EXPECT_THAT(got[0].values(), ElementsAre(10, 20.5f));
  EXPECT_THAT(got[1].values(), ElementsAre(90, 80));

  // GB in, GB out: the very same floats.
  filter.set_name("free_memory");
  got = Get(filter, &status);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_THAT(got[0].values(), ElementsAre(1.1f, 2.7f));

  filter.clear_name();
  filter.set_metric_type(TrialProfilerMetricLabels::PROFILER_METRIC_TYPE_TIMING);
  got = Get(filter, &status);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].labels().name(), "dataloader_next");
  EXPECT_THAT(got[0].values(), ElementsAre(0.125f));

  // The new API sees the system readings, in bytes under the new name.
  grpc::ClientContext query_context;
  v1::QuerySeriesRequest query;
  query.set_trial_id(kTrial);
  query.add_name("memory_free");
  v1::QuerySeriesResponse answer;
  ASSERT_TRUE(query_->QuerySeries(&query_context, query, &answer).ok());
  ASSERT_EQ(answer.series_size(), 1);
  EXPECT_EQ(answer.series(0).series().unit(), "bytes");
  EXPECT_THAT(answer.series(0).max(),
              ElementsAre(static_cast<double>(1.1f) * 1e9,
                          static_cast<double>(2.7f) * 1e9));

  EXPECT_EQ(server_->server().legacy_statistics().Calls().at(
                "PostTrialProfilerMetricsBatch"),
            1);
  EXPECT_EQ(server_->server().legacy_statistics().Calls().at(
                "GetTrialProfilerMetrics"),
            3);
}

// A post refused before its work (no token where one is required) is
// counted and marked deprecated as a served one is.
TEST(LegacyProfilerRefusalTest, ARefusedPostIsCountedAndMarkedDeprecated) {
  ServerOptions options;
  options.auth_required = true;
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<TestServer> server, TestServer::Start(options));
  std::unique_ptr<Determined::Stub> legacy = Determined::NewStub(server->Channel());
  grpc::ClientContext context;
  PostTrialProfilerMetricsBatchRequest request;
  *request.add_batches() = Batch("gpu_util", "GPU-0", {10});
  PostTrialProfilerMetricsBatchResponse response;
  const grpc::Status status = legacy->PostTrialProfilerMetricsBatch(&context, request, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAUTHENTICATED) << status.error_message();
  const auto& metadata = context.GetServerInitialMetadata();
  ASSERT_EQ(metadata.count("deprecation"), 1u);
  EXPECT_EQ(metadata.find("deprecation")->second, "@1795305600");
  ASSERT_EQ(metadata.count("link"), 1u);
  EXPECT_EQ(std::string(metadata.find("link")->second.data(),
                        metadata.find("link")->second.size()),
            absl::StrCat("</api/v1/trials/", kTrial,
                         "/metrics/system>; rel=\"successor-version\""));
  EXPECT_EQ(server->server().legacy_statistics().Calls().at("PostTrialProfilerMetricsBatch"), 1);
}

TEST_F(LegacyProfilerServiceTest, BadBatchStoresNothing) {
  TrialProfilerMetricsBatch unequal = Batch("cpu_util_simple", "", {1, 2});
  unequal.add_values(3);
  grpc::Status status = Post({Batch("gpu_util", "GPU-0", {10}), unequal});
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(status.error_message(), HasSubstr("batches[1]"));
  EXPECT_THAT(status.error_message(), HasSubstr("equal lengths"));

  TrialProfilerMetricsBatch untyped = Batch("gpu_util", "GPU-0", {1});
  untyped.mutable_labels()->set_metric_type(
      TrialProfilerMetricLabels::PROFILER_METRIC_TYPE_UNSPECIFIED);
  status = Post({untyped});
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(status.error_message(), HasSubstr("batches[0].labels.metric_type"));

  status = Post({Batch("gpu_util", "GPU-0", {std::nanf("")})});
  EXPECT_THAT(status.error_message(), HasSubstr("batches[0].values[0]"));

  TrialProfilerMetricLabels filter;
  filter.set_trial_id(kTrial);
  std::vector<TrialProfilerMetricsBatch> got = Get(filter, &status);
  ASSERT_TRUE(status.ok());
  EXPECT_TRUE(got.empty());

  Complete();
  status = Post({Batch("gpu_util", "GPU-0", {10})});
  EXPECT_EQ(status.error_code(), grpc::StatusCode::FAILED_PRECONDITION);

  filter.set_trial_id(404);
  Get(filter, &status);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::NOT_FOUND);
}

TEST_F(LegacyProfilerServiceTest, FollowSendsNewReadingsAndEndsWithTheTrial) {
  ASSERT_TRUE(Post({Batch("cpu_util_simple", "", {1, 2})}).ok());
  grpc::ClientContext metrics_context;
  GetTrialProfilerMetricsRequest request;
  request.mutable_labels()->set_trial_id(kTrial);
  request.set_follow(true);
  auto metrics = legacy_->GetTrialProfilerMetrics(&metrics_context, request);

  grpc::ClientContext series_context;
  GetTrialProfilerAvailableSeriesRequest series_request;
  series_request.set_trial_id(kTrial);
  series_request.set_follow(true);
  auto series =
      legacy_->GetTrialProfilerAvailableSeries(&series_context, series_request);

  GetTrialProfilerMetricsResponse got;
  ASSERT_TRUE(metrics->Read(&got));
  EXPECT_THAT(got.batch().values(), ElementsAre(1, 2));
  GetTrialProfilerAvailableSeriesResponse listed;
  ASSERT_TRUE(series->Read(&listed));
  ASSERT_EQ(listed.labels_size(), 1);

  ASSERT_TRUE(
      Post({Batch("cpu_util_simple", "", {3}, TrialProfilerMetricLabels::
                                                  PROFILER_METRIC_TYPE_SYSTEM,
                  kStart + 10),
            Batch("gpu_util", "GPU-0", {50}, TrialProfilerMetricLabels::
                                                 PROFILER_METRIC_TYPE_SYSTEM,
                  kStart + 10)})
          .ok());
  std::vector<float> values;
  while (values.size() < 2 && metrics->Read(&got)) {
    values.insert(values.end(), got.batch().values().begin(),
                  got.batch().values().end());
  }
  EXPECT_THAT(values, UnorderedElementsAre(3, 50));
  ASSERT_TRUE(series->Read(&listed));
  EXPECT_EQ(listed.labels_size(), 2);

  Complete();
  EXPECT_FALSE(metrics->Read(&got));
  EXPECT_TRUE(metrics->Finish().ok());
  EXPECT_FALSE(series->Read(&listed));
  EXPECT_TRUE(series->Finish().ok());
}

}  // namespace
}  // namespace metrics::server
