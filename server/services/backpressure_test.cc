// Backpressure of ingest, through gRPC against the real server and store:
// a stream has at most a few batches awaiting commit (then the server stops
// reading it), and a full queue ends the stream with RESOURCE_EXHAUSTED and
// a retry hint; a REST call past its deadline answers 504. Faults come from
// a FaultInjectingMetricStore around the real PostgreSQL store.
#include <grpcpp/client_context.h>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/testing/status_matchers.h"
#include "common/time_format.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "proto/metrics/v1/ingest.grpc.pb.h"
#include "proto/metrics/v1/trials.grpc.pb.h"
#include "storage/testing/fault_injecting_metric_store.h"
#include "tests/testing/http_client.h"
#include "tests/testing/resending_streamer.h"
#include "tests/testing/test_server.h"

namespace metrics::server {
namespace {

using ::metrics::storage::test_util::FaultInjectingMetricStore;
using ::metrics::test_util::ResendingStreamer;
using ::metrics::test_util::StreamerOptions;
using ::metrics::test_util::TestServer;
using ::testing::HasSubstr;

v1::SystemMetricsBatch Batch(int64_t sequence) {
  v1::SystemMetricsBatch batch;
  batch.set_sequence(sequence);
  batch.set_agent_id("agent-a");
  v1::SeriesDeclaration* s = batch.add_series();
  s->set_name("cpu_util_simple");
  s->set_unit("percent");
  v1::SystemMetricsReport* r = batch.add_reports();
  r->mutable_time()->set_seconds(absl::ToUnixSeconds(absl::Now()) - 600 +
                                 sequence);
  r->add_series(0);
  r->add_values(sequence);
  return batch;
}

class BackpressureTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ServerOptions options;
    options.ingest.max_inflight = 4;
    options.gateway.request_timeout = absl::Seconds(1);
    ASSERT_OK_AND_ASSIGN(
        server_, TestServer::Start(options, [this](auto base) {
          auto wrapped =
              std::make_unique<FaultInjectingMetricStore>(std::move(base));
          store_ = wrapped.get();
          return wrapped;
        }));
    auto trials = v1::TrialService::NewStub(server_->Channel());
    grpc::ClientContext context;
    v1::CreateTrialRequest request;
    request.set_id(1);
    v1::Trial trial;
    ASSERT_TRUE(trials->CreateTrial(&context, request, &trial).ok());
    ingest_ = v1::IngestService::NewStub(server_->Channel());
  }

  std::unique_ptr<TestServer> server_;
  FaultInjectingMetricStore* store_ = nullptr;
  std::unique_ptr<v1::IngestService::Stub> ingest_;
};

// A REST call past --http-request-timeout answers 504 DEADLINE_EXCEEDED in
// the gateway's error shape, while the database stalls.
TEST_F(BackpressureTest, RestCallPastItsDeadlineIs504) {
  store_->HoldOutcomes();
  const std::string body = absl::StrCat(
      R"({"batch":{"agentId":"a","series":[{"name":"cpu_util_simple"}],)",
      R"("reports":[{"time":")", common::Rfc3339(absl::Now()),
      R"(","series":[0],"values":[1]}]}})");
  ASSERT_OK_AND_ASSIGN(
      ::metrics::test_util::HttpResult result,
      ::metrics::test_util::HttpCall(server_->http_port(), "POST",
                                   "/api/v1/trials/1/metrics/system", body));
  store_->ReleaseOutcomes();
  EXPECT_EQ(result.status, 504) << result.body;
  EXPECT_THAT(result.body, HasSubstr("\"code\":4"));
}

TEST_F(BackpressureTest, AStreamHasAtMostMaxInflightBatchesAwaitingCommit) {
  store_->HoldOutcomes();  // the database "stalls": no commit completes
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(60)));
  auto stream = ingest_->StreamSystemMetrics(&context);
  v1::StreamSystemMetricsRequest open;
  open.mutable_open()->set_stream_id("s");
  open.mutable_open()->set_trial_id(1);
  ASSERT_TRUE(stream->Write(open));
  v1::StreamSystemMetricsResponse ack;
  ASSERT_TRUE(stream->Read(&ack));
  for (int seq = 1; seq <= 20; ++seq) {
    v1::StreamSystemMetricsRequest request;
    *request.mutable_batch() = Batch(seq);
    ASSERT_TRUE(stream->Write(request));  // small: fits the flow window
  }
  ASSERT_TRUE(store_->AwaitSubmitted(4, absl::Seconds(30)));
  // The server stopped reading: no fifth batch reaches the store.
  EXPECT_FALSE(store_->AwaitSubmitted(5, absl::Seconds(1)));
  EXPECT_EQ(store_->submitted(), 4);

  store_->ReleaseOutcomes();
  stream->WritesDone();
  int64_t acked = 0;
  while (stream->Read(&ack)) acked = ack.acked_sequence();
  ASSERT_TRUE(stream->Finish().ok());
  EXPECT_EQ(acked, 20);
  EXPECT_EQ(store_->submitted(), 20);
}

TEST_F(BackpressureTest, FullQueueEndsTheStreamWithARetryHint) {
  store_->FailNextSubmits(
      1, absl::ResourceExhaustedError("the ingest queue is full; retry later"));
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(60)));
  auto stream = ingest_->StreamSystemMetrics(&context);
  v1::StreamSystemMetricsRequest open;
  open.mutable_open()->set_stream_id("s");
  open.mutable_open()->set_trial_id(1);
  ASSERT_TRUE(stream->Write(open));
  v1::StreamSystemMetricsRequest request;
  *request.mutable_batch() = Batch(1);
  stream->Write(request);
  stream->WritesDone();
  v1::StreamSystemMetricsResponse ack;
  while (stream->Read(&ack)) {
  }
  grpc::Status status = stream->Finish();
  EXPECT_EQ(status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_THAT(status.error_message(), HasSubstr("the ingest queue is full"));
  const auto& trailers = context.GetServerTrailingMetadata();
  auto hint = trailers.find("retry-after-ms");
  ASSERT_NE(hint, trailers.end());
  EXPECT_EQ(std::string(hint->second.data(), hint->second.size()), "1000");

  // After the hint, a reconnect resends and gets through.
  StreamerOptions options;
  options.stream_id = "s";
  options.trial_id = 1;
  ResendingStreamer streamer([&] { return server_->grpc_target(); }, options);
  ASSERT_OK(streamer.SendAll({Batch(1), Batch(2)}));
}

TEST_F(BackpressureTest, FullQueueRefusesAUnaryReportWithARetryHint) {
  store_->FailNextSubmits(
      1, absl::ResourceExhaustedError("the ingest queue is full; retry later"));
  grpc::ClientContext context;
  v1::ReportSystemMetricsRequest request;
  *request.mutable_batch() = Batch(1);
  request.mutable_batch()->set_trial_id(1);
  v1::ReportSystemMetricsResponse response;
  grpc::Status status =
      ingest_->ReportSystemMetrics(&context, request, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_EQ(context.GetServerTrailingMetadata().count("retry-after-ms"), 1u);
}

}  // namespace
}  // namespace metrics::server
