// Backpressure of ingest, through gRPC against the real server and store:
// a stream has at most a few batches awaiting commit (then the server stops
// reading it), and a full queue ends the stream with RESOURCE_EXHAUSTED and
// a retry hint; stream openings wait their turn (bounded by the open queue
// and the open timeout) without crowding out unary calls; an agent with too
// many rows waiting for the sealer is refused with a short hint; a REST call past
// its deadline answers 504. Faults come from a FaultInjectingMetricStore
// around the real PostgreSQL store.
#include <grpcpp/client_context.h>

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/testing/status_matchers.h"
#include "common/time_format.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "proto/metrics/v1/ingest.grpc.pb.h"
#include "proto/metrics/v1/trials.grpc.pb.h"
#include "storage/pg/jobs/seal_trigger.h"
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
    Start(options);
  }

  void Start(const ServerOptions& options) {
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

  // Opens stream `stream_id` of trial 1, sends its batch 1 and ends it; the
  // stream's status, with the server's trailers in `context`.
  grpc::Status SendOneBatch(const std::string& stream_id,
                            grpc::ClientContext& context) {
    context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(60)));
    auto stream = ingest_->StreamSystemMetrics(&context);
    v1::StreamSystemMetricsRequest open;
    open.mutable_open()->set_stream_id(stream_id);
    open.mutable_open()->set_trial_id(1);
    stream->Write(open);
    v1::StreamSystemMetricsRequest request;
    *request.mutable_batch() = Batch(1);
    stream->Write(request);
    stream->WritesDone();
    v1::StreamSystemMetricsResponse ack;
    while (stream->Read(&ack)) {
    }
    return stream->Finish();
  }

  std::unique_ptr<TestServer> server_;
  FaultInjectingMetricStore* store_ = nullptr;
  std::unique_ptr<v1::IngestService::Stub> ingest_;
};

// Stream openings on one thread, so a held one makes the others queue.
class StreamOpenTest : public BackpressureTest {
 protected:
  void SetUp() override {}

  void StartWith(size_t open_queue, absl::Duration open_timeout) {
    ServerOptions options;
    options.open_threads = 1;
    options.open_queue = open_queue;
    options.ingest.open_timeout = open_timeout;
    // Unary calls queue here; opens must not.
    options.executor_queue = 2;
    Start(options);
  }

  std::string Trailer(const grpc::ClientContext& context,
                      const std::string& key) {
    const auto& trailers = context.GetServerTrailingMetadata();
    auto it = trailers.find(key);
    return it == trailers.end()
               ? ""
               : std::string(it->second.data(), it->second.size());
  }
};

TEST_F(StreamOpenTest, OpensWaitTheirTurnAndUnaryCallsGoOnMeanwhile) {
  ASSERT_NO_FATAL_FAILURE(StartWith(1000, absl::Seconds(30)));
  store_->HoldStreamStarts();
  constexpr int kStreams = 12;
  std::vector<grpc::Status> statuses(kStreams);
  std::vector<std::thread> streams;
  for (int i = 0; i < kStreams; ++i) {
    streams.emplace_back([&, i] {
      grpc::ClientContext context;
      statuses[i] = SendOneBatch(absl::StrCat("agent-", i), context);
    });
  }
  // One open reads (held); the others wait behind it, more of them than the
  // unary queue would take.
  ASSERT_TRUE(store_->AwaitHeldStreamStarts(1, absl::Seconds(30)));
  // Time for the others to queue: none can be observed before it is.
  absl::SleepFor(absl::Milliseconds(300));

  auto trials = v1::TrialService::NewStub(server_->Channel());
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(5)));
  v1::GetTrialRequest get;
  get.set_trial_id(1);
  v1::Trial trial;
  grpc::Status unary = trials->GetTrial(&context, get, &trial);
  EXPECT_TRUE(unary.ok()) << unary.error_message();

  store_->ReleaseStreamStarts();
  for (std::thread& t : streams) t.join();
  for (int i = 0; i < kStreams; ++i) {
    EXPECT_TRUE(statuses[i].ok())
        << "stream " << i << ": " << statuses[i].error_message();
  }
  ASSERT_TRUE(store_->AwaitSubmitted(kStreams, absl::Seconds(30)));
}

TEST_F(StreamOpenTest, AnOpenThatWaitsPastTheOpenTimeoutIsRefusedWithAHint) {
  ASSERT_NO_FATAL_FAILURE(StartWith(1000, absl::Milliseconds(500)));
  store_->HoldStreamStarts();
  std::thread first([&] {
    grpc::ClientContext context;
    (void)SendOneBatch("agent-first", context);  // its own deadline passes
  });
  ASSERT_TRUE(store_->AwaitHeldStreamStarts(1, absl::Seconds(30)));
  grpc::Status status;
  grpc::ClientContext context;
  std::thread second([&] { status = SendOneBatch("agent-second", context); });
  // The second waits behind the first past its own open timeout: a wait
  // that must happen, so a sleep, not a condition.
  absl::SleepFor(absl::Seconds(1));
  store_->ReleaseStreamStarts();
  second.join();
  first.join();
  EXPECT_EQ(status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_THAT(status.error_message(),
              HasSubstr("waited 500ms for its turn; the server is busy "
                        "opening other streams"));
  EXPECT_EQ(Trailer(context, "retry-after-ms"), "1000");
}

TEST_F(StreamOpenTest, AFullOpenQueueRefusesAtOnceWithAHint) {
  ASSERT_NO_FATAL_FAILURE(StartWith(1, absl::Seconds(30)));
  store_->HoldStreamStarts();
  std::vector<std::thread> waiting;
  std::vector<grpc::Status> statuses(2);
  waiting.emplace_back([&] {
    grpc::ClientContext context;
    statuses[0] = SendOneBatch("agent-running", context);
  });
  ASSERT_TRUE(store_->AwaitHeldStreamStarts(1, absl::Seconds(30)));
  waiting.emplace_back([&] {
    grpc::ClientContext context;
    statuses[1] = SendOneBatch("agent-queued", context);
  });
  absl::SleepFor(absl::Milliseconds(300));  // the queue's one place is taken

  grpc::ClientContext context;
  grpc::Status refused = SendOneBatch("agent-refused", context);
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_THAT(refused.error_message(),
              HasSubstr("the server is busy opening other streams"));
  EXPECT_EQ(Trailer(context, "retry-after-ms"), "1000");

  store_->ReleaseStreamStarts();
  for (std::thread& t : waiting) t.join();
  EXPECT_TRUE(statuses[0].ok()) << statuses[0].error_message();
  EXPECT_TRUE(statuses[1].ok()) << statuses[1].error_message();
}

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

// An agent with more rows waiting for the sealer than it lets wait
// (SealTrigger) has its next batch refused with the trigger's short hint,
// and gets through once the sealer took them. No sealer runs here: the
// test plays its part, so nothing races.
TEST_F(BackpressureTest, AnAgentWhoseRowsWaitForTheSealerIsRefusedWithAShortHint) {
  // Refused however recently it sealed: no lag allowed.
  auto trigger = std::make_shared<storage::pg::SealTrigger>(100, absl::ZeroDuration());
  ServerOptions options;
  options.seal_every = absl::ZeroDuration();
  options.seal_trigger = trigger;
  options.store.writer.on_stored = [trigger](int32_t trial, const std::string& agent,
                                             int64_t reports) {
    trigger->Stored(trial, agent, reports);
  };
  options.store.writer.admit = [trigger](int32_t trial, const std::string& agent) {
    return trigger->Admit(trial, agent);
  };
  ASSERT_NO_FATAL_FAILURE(Start(options));
  // 450 reports of agent-a: four times the threshold and more.
  v1::SystemMetricsBatch dense = Batch(1);
  for (int i = 1; i < 450; ++i) {
    v1::SystemMetricsReport* r = dense.add_reports();
    r->mutable_time()->set_seconds(absl::ToUnixSeconds(absl::Now()) - 300);
    r->mutable_time()->set_nanos(i * 1000000);
    r->add_series(0);
    r->add_values(i);
  }
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(60)));
  auto stream = ingest_->StreamSystemMetrics(&context);
  v1::StreamSystemMetricsRequest open;
  open.mutable_open()->set_stream_id("dense");
  open.mutable_open()->set_trial_id(1);
  ASSERT_TRUE(stream->Write(open));
  v1::StreamSystemMetricsRequest request;
  *request.mutable_batch() = dense;
  ASSERT_TRUE(stream->Write(request));
  v1::StreamSystemMetricsResponse ack;
  do {  // the answer to the open, then batch 1's: stored, and counted
    ASSERT_TRUE(stream->Read(&ack));
  } while (ack.acked_sequence() < 1);
  *request.mutable_batch() = Batch(2);
  stream->Write(request);
  stream->WritesDone();
  while (stream->Read(&ack)) {
  }
  const grpc::Status status = stream->Finish();
  EXPECT_EQ(status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_THAT(status.error_message(),
              HasSubstr("agent agent-a of trial 1 has 450 reports waiting for their seal"));
  const auto& trailers = context.GetServerTrailingMetadata();
  auto hint = trailers.find("retry-after-ms");
  ASSERT_NE(hint, trailers.end());
  EXPECT_EQ(std::string(hint->second.data(), hint->second.size()), "200");

  // The sealer takes them; the client's resend gets through.
  trigger->Sealed(1, "agent-a", 450);
  StreamerOptions resend;
  resend.stream_id = "dense";
  resend.trial_id = 1;
  ResendingStreamer streamer([&] { return server_->grpc_target(); }, resend);
  ASSERT_OK(streamer.SendAll({dense, Batch(2)}));
}

}  // namespace
}  // namespace metrics::server
