// Open streams of a token revoked in the database end UNAUTHENTICATED, in
// process (so the sanitizer builds see the credential watch's callbacks race
// gRPC's own): rounds of ingest streams and follows whose token is revoked
// while they run, some of them cancelled by their clients at the same
// moment, each stream ending once, with the revocation or its cancel; the
// streams of a token kept go on.
#include <grpcpp/grpcpp.h>

#include <atomic>
#include <memory>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "common/testing/eventually.h"
#include "common/testing/status_matchers.h"
#include "common/testing/test_time.h"
#include "gtest/gtest.h"
#include "proto/metrics/v1/ingest.grpc.pb.h"
#include "proto/metrics/v1/query.grpc.pb.h"
#include "storage/pg/pg_metric_store.h"
#include "storage/pg/pg_token_store.h"
#include "tests/testing/test_server.h"

namespace metrics::server {
namespace {

using ::metrics::test_util::TestServer;

using ::metrics::test_util::Deadline;

// A stream run on a thread of its own until the server ends it (or the
// client cancels), noting how it ended.
class Stream {
 public:
  virtual ~Stream() {
    if (thread_.joinable()) thread_.join();
  }
  void Cancel() { context_.TryCancel(); }
  bool ended() const { return ended_.load(); }
  grpc::StatusCode code() {
    absl::MutexLock lock(&mu_);
    return code_;
  }

 protected:
  void Run(std::function<grpc::Status()> body) {
    thread_ = std::thread([this, body = std::move(body)] {
      const grpc::Status status = body();
      {
        absl::MutexLock lock(&mu_);
        code_ = status.error_code();
      }
      ended_ = true;
    });
  }
  grpc::ClientContext context_;

 private:
  std::thread thread_;
  std::atomic<bool> ended_{false};
  absl::Mutex mu_;
  grpc::StatusCode code_ ABSL_GUARDED_BY(mu_) = grpc::StatusCode::OK;
};

class IngestStream : public Stream {
 public:
  IngestStream(v1::IngestService::Stub& stub, const std::string& token,
               int32_t trial, const std::string& id) {
    context_.AddMetadata("authorization", "Bearer " + token);
    context_.set_deadline(absl::ToChronoTime(Deadline()));
    Run([this, &stub, trial, id] {
      auto stream = stub.StreamSystemMetrics(&context_);
      v1::StreamSystemMetricsRequest open;
      open.mutable_open()->set_stream_id(id);
      open.mutable_open()->set_trial_id(trial);
      v1::StreamSystemMetricsResponse ack;
      if (stream->Write(open) && stream->Read(&ack)) {
        for (int64_t sequence = 1;; ++sequence) {
          v1::StreamSystemMetricsRequest message;
          v1::SystemMetricsBatch* batch = message.mutable_batch();
          batch->set_sequence(sequence);
          batch->set_agent_id(id);
          v1::SeriesDeclaration* series = batch->add_series();
          series->set_name("cpu_util");
          series->set_unit("percent");
          v1::SystemMetricsReport* report = batch->add_reports();
          report->mutable_time()->set_seconds(absl::ToUnixSeconds(absl::Now()));
          report->mutable_time()->set_nanos(static_cast<int32_t>(sequence % 1000) * 1000);
          report->add_values(1.0);
          if (!stream->Write(message) || !stream->Read(&ack)) break;
          absl::SleepFor(absl::Milliseconds(20));
        }
      }
      return stream->Finish();
    });
  }
};

class FollowStream : public Stream {
 public:
  FollowStream(v1::QueryService::Stub& stub, const std::string& token,
               int32_t trial) {
    context_.AddMetadata("authorization", "Bearer " + token);
    context_.set_deadline(absl::ToChronoTime(Deadline()));
    Run([this, &stub, trial] {
      v1::QuerySeriesRequest request;
      request.set_trial_id(trial);
      auto reader = stub.FollowSeries(&context_, request);
      v1::QuerySeriesResponse update;
      while (reader->Read(&update)) {
      }
      return reader->Finish();
    });
  }
};

TEST(StreamRevocationTest, ARevokedTokensStreamsEndAndAKeptTokensGoOn) {
  ServerOptions options;
  options.auth_required = true;
  options.auth_recheck = absl::Milliseconds(300);
  options.auth_stream_tick = absl::Milliseconds(50);
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<TestServer> server,
                       TestServer::Start(options));
  storage::pg::PgMetricStoreOptions store_options;
  store_options.database_url = server->database_url();
  ASSERT_OK(storage::pg::PgMetricStore::Create(store_options)
                ->CreateTrial(1, Deadline())
                .status());
  storage::pg::PgTokenStore tokens(server->database_url());
  const auto token = [&](storage::TokenRole role) {
    storage::TokenRequest request;
    request.role = role;
    if (role == storage::TokenRole::kReporter) request.trial_id = 1;
    absl::StatusOr<storage::CreatedToken> created = tokens.Create(request, Deadline());
    EXPECT_OK(created);
    return created.ok() ? *created : storage::CreatedToken{};
  };
  auto ingest = v1::IngestService::NewStub(server->Channel());
  auto query = v1::QueryService::NewStub(server->Channel());
  const storage::CreatedToken kept = token(storage::TokenRole::kViewer);
  FollowStream lasting(*query, kept.secret, 1);

  for (int round = 0; round < 6; ++round) {
    SCOPED_TRACE(absl::StrCat("round ", round));
    const storage::CreatedToken reporter = token(storage::TokenRole::kReporter);
    const storage::CreatedToken viewer = token(storage::TokenRole::kViewer);
    std::vector<std::unique_ptr<Stream>> streams;
    for (int i = 0; i < 2; ++i) {
      streams.push_back(std::make_unique<IngestStream>(
          *ingest, reporter.secret, 1, absl::StrCat("r", round, "-", i)));
      streams.push_back(std::make_unique<FollowStream>(*query, viewer.secret, 1));
    }
    absl::SleepFor(absl::Milliseconds(400));  // open, watched, first answers out
    for (const auto& s : streams) ASSERT_FALSE(s->ended());
    ASSERT_OK(tokens.Revoke(reporter.token.id, Deadline()).status());
    ASSERT_OK(tokens.Revoke(viewer.token.id, Deadline()).status());
    // Some clients leave just as the watch ends their streams.
    if (round % 2 == 1) {
      absl::SleepFor(absl::Milliseconds(250 + 20 * round));
      streams[0]->Cancel();
      streams[1]->Cancel();
    }
    for (const auto& s : streams) {
      EXPECT_TRUE(test_util::Eventually([&] { return s->ended(); },
                                        absl::Seconds(3), absl::Milliseconds(10)));
    }
    for (size_t i = 0; i < streams.size(); ++i) {
      const grpc::StatusCode code = streams[i]->code();
      if (round % 2 == 1 && i < 2) {
        EXPECT_TRUE(code == grpc::StatusCode::UNAUTHENTICATED ||
                    code == grpc::StatusCode::CANCELLED)
            << i << ": " << code;
      } else {
        EXPECT_EQ(code, grpc::StatusCode::UNAUTHENTICATED) << i;
      }
    }
  }
  EXPECT_FALSE(lasting.ended());
  lasting.Cancel();
}

}  // namespace
}  // namespace metrics::server
