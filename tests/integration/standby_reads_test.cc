// Reads from a hot standby: a metricsd given --read-database-url
// answers charts, series listings and trial lists from a real
// streaming-replication standby (ReplicatedCluster), the same answers as the
// primary's once it has caught up; it reads from the primary when the
// standby lags more than the limit or does not answer, and says so in
// /metrics; follow always reads the primary. Pausing the standby's replay
// (pg_wal_replay_pause) makes its data differ from the primary's, which
// shows which server answered.
#include <grpcpp/client_context.h>
#include <google/protobuf/util/message_differencer.h>

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/match.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "common/testing/eventually.h"
#include "common/testing/status_matchers.h"
#include "gtest/gtest.h"
#include "proto/metrics/v1/query.grpc.pb.h"
#include "proto/metrics/v1/trials.grpc.pb.h"
#include "storage/pg/pg_metric_store.h"
#include "storage/pg/testing/pg_checks.h"
#include "tests/testing/http_client.h"
#include "tests/testing/realistic_batch.h"
#include "tests/testing/replicated_cluster.h"
#include "tests/testing/resending_streamer.h"
#include "tests/testing/test_server.h"
#include "tests/testing/trials.h"

namespace metrics::test_util {
namespace {

namespace pgtest = ::metrics::storage::pg::test_util;
using ::google::protobuf::util::MessageDifferencer;
using Server = ReplicatedCluster::Server;

constexpr int kReportsPerBatch = 10;
const absl::Time kStart = absl::FromUnixSeconds(1'790'000'000);

constexpr const char* kStandbyReads = "metricsd_standby_reads_total";
constexpr const char* kLagging =
    "metricsd_standby_fallbacks_total{reason=\"lagging\"}";
constexpr const char* kUnreachable =
    "metricsd_standby_fallbacks_total{reason=\"unreachable\"}";
constexpr const char* kRetried =
    "metricsd_standby_fallbacks_total{reason=\"retried\"}";

class StandbyReadsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_OK_AND_ASSIGN(cluster_, ReplicatedCluster::Create());
    server::ServerOptions plain;
    plain.migrate = true;
    ASSERT_OK_AND_ASSIGN(primary_only_,
                         TestServer::StartOn(Url(Server::kPrimary), plain));
  }

  void TearDown() override {
    with_standby_.reset();
    primary_only_.reset();
  }

  std::string Url(Server server) const {
    return server == Server::kPrimary ? cluster_->primary_url("postgres")
                                      : cluster_->standby_url("postgres");
  }

  // Trial 1 with `batches` batches, replayed by the standby; then the
  // server under test, reading from the standby while it lags at most
  // `max_lag`, once it does (reads before its first check of the standby
  // go to the primary).
  void StartOnACaughtUpStandby(int batches, absl::Duration max_lag) {
    ASSERT_OK(CreateTrial(primary_only_->Channel(), 1));
    Ingest(batches);
    ASSERT_OK(cluster_->AwaitStandbyCaughtUp(absl::Seconds(30)));
    server::ServerOptions options;
    options.store.read.database_url = Url(Server::kStandby);
    options.store.read.max_lag = max_lag;
    options.store.read.check_every = absl::Milliseconds(100);
    ASSERT_OK_AND_ASSIGN(with_standby_,
                         TestServer::StartOn(Url(Server::kPrimary), options));
    ASSERT_TRUE(ReadsGoToTheStandby());
  }

  // Whether a chart is soon read from the standby.
  bool ReadsGoToTheStandby() {
    return Eventually([&] {
      const double before = Figure(*with_standby_, kStandbyReads);
      return Chart(*with_standby_).ok() &&
             Figure(*with_standby_, kStandbyReads) > before;
    });
  }

  // `batches` more batches of 10 reports (one a second) for trial 1.
  void Ingest(int batches) {
    std::vector<v1::SystemMetricsBatch> out;
    for (int b = 0; b < batches; ++b, ++batches_sent_) {
      v1::SystemMetricsBatch batch;
      batch.set_trial_id(1);
      batch.set_agent_id("agent-0");
      DeclareRealisticSeries(batch);
      for (int r = 0; r < kReportsPerBatch; ++r) {
        const int i = batches_sent_ * kReportsPerBatch + r;
        AddRealisticReport(batch, kStart + absl::Seconds(i), i);
      }
      out.push_back(std::move(batch));
    }
    StreamerOptions options;
    options.stream_id = absl::StrCat("stream-", streams_++);
    options.trial_id = 1;
    const std::string target = primary_only_->grpc_target();
    ResendingStreamer streamer([&] { return target; }, options);
    ASSERT_OK(streamer.SendAll(std::move(out)));
  }

  // Trial 1's chart as QuerySeries answers it, or as the first answer of
  // a FollowSeries.
  static absl::StatusOr<v1::QuerySeriesResponse> Chart(TestServer& server,
                                                       bool follow = false) {
    auto stub = v1::QueryService::NewStub(server.Channel());
    grpc::ClientContext context;
    context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(30)));
    v1::QuerySeriesRequest request;
    request.set_trial_id(1);
    request.set_max_points(100);
    v1::QuerySeriesResponse response;
    if (follow) {
      auto reader = stub->FollowSeries(&context, request);
      if (!reader->Read(&response)) {
        return absl::UnavailableError("the follow ended before its first answer");
      }
      context.TryCancel();
      return response;
    }
    const grpc::Status status = stub->QuerySeries(&context, request, &response);
    if (!status.ok()) {
      return absl::Status(static_cast<absl::StatusCode>(status.error_code()),
                          status.error_message());
    }
    return response;
  }

  // Lines of trial 1's CSV export (a sample each, after the header).
  static absl::StatusOr<int64_t> ExportedLines(TestServer& server) {
    auto stub = v1::QueryService::NewStub(server.Channel());
    grpc::ClientContext context;
    context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(30)));
    v1::ExportSamplesRequest request;
    request.set_trial_id(1);
    auto reader = stub->ExportSamples(&context, request);
    v1::ExportChunk chunk;
    int64_t lines = 0;
    while (reader->Read(&chunk)) {
      lines += std::count(chunk.data().begin(), chunk.data().end(), '\n');
    }
    const grpc::Status status = reader->Finish();
    if (!status.ok()) {
      return absl::Status(static_cast<absl::StatusCode>(status.error_code()),
                          status.error_message());
    }
    return lines - 1;
  }

  // Samples in a chart: the sum of its buckets' counts.
  static int64_t Samples(const v1::QuerySeriesResponse& chart) {
    int64_t n = 0;
    for (const auto& series : chart.series()) {
      for (int64_t c : series.count()) n += c;
    }
    return n;
  }

  // A sample of the server's GET /metrics, e.g.
  // metricsd_standby_fallbacks_total{reason="lagging"}; -1 if absent.
  static double Figure(const TestServer& server, absl::string_view sample) {
    absl::StatusOr<HttpResult> got =
        HttpCall(server.http_port(), "GET", "/metrics");
    if (!got.ok() || got->status != 200) {
      ADD_FAILURE() << "GET /metrics: "
                    << (got.ok() ? absl::StrCat(got->status) : got.status().ToString());
      return -1;
    }
    for (absl::string_view line : absl::StrSplit(got->body, '\n')) {
      if (absl::StartsWith(line, sample) && line.size() > sample.size() &&
          line[sample.size()] == ' ') {
        double value = 0;
        if (absl::SimpleAtod(line.substr(sample.size() + 1), &value)) {
          return value;
        }
      }
    }
    return -1;
  }

  void Standby(absl::string_view sql) {
    ASSERT_OK(pgtest::QueryScalar(Url(Server::kStandby),
                                  absl::StrCat("SELECT ", sql))
                  .status());
  }

  // Polls until `done` holds, for up to 10 s.
  template <typename Done>
  static bool Eventually(Done done) {
    return test_util::Eventually(done, absl::Seconds(10), absl::Milliseconds(50));
  }

  bool SameAsThePrimary() {
    absl::StatusOr<v1::QuerySeriesResponse> a = Chart(*with_standby_);
    absl::StatusOr<v1::QuerySeriesResponse> b = Chart(*primary_only_);
    return a.ok() && b.ok() && MessageDifferencer::Equals(*a, *b);
  }

  std::unique_ptr<ReplicatedCluster> cluster_;
  std::unique_ptr<TestServer> primary_only_;  // reads the primary
  std::unique_ptr<TestServer> with_standby_;
  int batches_sent_ = 0;
  int streams_ = 0;
};

TEST_F(StandbyReadsTest, ChartsSeriesAndTrialListsComeFromTheStandby) {
  ASSERT_NO_FATAL_FAILURE(StartOnACaughtUpStandby(5, absl::Hours(1)));
  const double unreachable = Figure(*with_standby_, kUnreachable);

  // Caught up: the same answers as the primary's.
  ASSERT_OK_AND_ASSIGN(const v1::QuerySeriesResponse before,
                       Chart(*with_standby_));
  EXPECT_EQ(Samples(before), 5 * kReportsPerBatch * kRealisticValuesPerReport);
  EXPECT_TRUE(SameAsThePrimary());

  // The standby stops replaying; the primary gets 5 more batches and a
  // second trial.
  Standby("pg_wal_replay_pause()");
  Ingest(5);
  ASSERT_OK(CreateTrial(primary_only_->Channel(), 2));
  const double reads_before = Figure(*with_standby_, kStandbyReads);
  // Paused, nothing conflicts with recovery: only the read below retries.
  const double retried = Figure(*with_standby_, kRetried);

  // Charts, series and trial lists answer the standby's (older) data...
  ASSERT_OK_AND_ASSIGN(const v1::QuerySeriesResponse paused,
                       Chart(*with_standby_));
  EXPECT_TRUE(MessageDifferencer::Equals(paused, before));
  ASSERT_OK_AND_ASSIGN(const v1::QuerySeriesResponse primary,
                       Chart(*primary_only_));
  EXPECT_EQ(Samples(primary), 10 * kReportsPerBatch * kRealisticValuesPerReport);
  {
    auto trials = v1::TrialService::NewStub(with_standby_->Channel());
    grpc::ClientContext context;
    v1::ListTrialsRequest request;
    v1::ListTrialsResponse response;
    ASSERT_TRUE(trials->ListTrials(&context, request, &response).ok());
    ASSERT_EQ(response.trials_size(), 1);  // trial 2 is not replayed yet
    EXPECT_EQ(response.trials(0).id(), 1);
  }
  EXPECT_GE(Figure(*with_standby_, kStandbyReads), reads_before + 2);

  // ...but a trial the standby has not replayed yet is found on the
  // primary, and follow reads the primary: its first answer has everything.
  {
    auto query = v1::QueryService::NewStub(with_standby_->Channel());
    grpc::ClientContext context;
    v1::ListSeriesRequest request;
    request.set_trial_id(2);
    v1::ListSeriesResponse response;
    const grpc::Status status = query->ListSeries(&context, request, &response);
    EXPECT_TRUE(status.ok()) << status.error_message();
    EXPECT_EQ(Figure(*with_standby_, kRetried), retried + 1);
  }
  ASSERT_OK_AND_ASSIGN(const v1::QuerySeriesResponse followed,
                       Chart(*with_standby_, /*follow=*/true));
  EXPECT_EQ(Samples(followed), Samples(primary));

  // Replaying again, it catches up and answers as the primary does.
  Standby("pg_wal_replay_resume()");
  ASSERT_OK(cluster_->AwaitStandbyCaughtUp(absl::Seconds(30)));
  EXPECT_TRUE(SameAsThePrimary());
  EXPECT_EQ(Figure(*with_standby_, kLagging), 0);
  EXPECT_EQ(Figure(*with_standby_, kUnreachable), unreachable);
}

TEST_F(StandbyReadsTest, AStandbyLaggingPastTheLimitIsLeftForThePrimary) {
  ASSERT_NO_FATAL_FAILURE(StartOnACaughtUpStandby(3, absl::Seconds(2)));

  // An idle primary is no lag: more than the limit with nothing written,
  // and reads still go to the standby. (The last replayed commit is older
  // than the limit by then.)
  absl::SleepFor(absl::Seconds(3));
  const double reads = Figure(*with_standby_, kStandbyReads);
  EXPECT_TRUE(SameAsThePrimary());
  EXPECT_GT(Figure(*with_standby_, kStandbyReads), reads);
  EXPECT_EQ(Figure(*with_standby_, kLagging), 0);
  EXPECT_GE(Figure(*with_standby_, "metricsd_standby_lag_seconds"), 0);
  EXPECT_LT(Figure(*with_standby_, "metricsd_standby_lag_seconds"), 2);

  // Replay paused and new data on the primary: once the lag passes 2 s,
  // charts come from the primary, and /metrics counts why.
  Standby("pg_wal_replay_pause()");
  Ingest(3);
  EXPECT_TRUE(Eventually([&] { return SameAsThePrimary(); }));
  EXPECT_GT(Figure(*with_standby_, kLagging), 0);
  EXPECT_GT(Figure(*with_standby_, "metricsd_standby_lag_seconds"), 2);

  // Caught up again, reads go back to the standby.
  Standby("pg_wal_replay_resume()");
  ASSERT_OK(cluster_->AwaitStandbyCaughtUp(absl::Seconds(30)));
  EXPECT_TRUE(ReadsGoToTheStandby());
  EXPECT_TRUE(SameAsThePrimary());
}

TEST_F(StandbyReadsTest, AStoppedStandbyIsLeftForThePrimaryUntilItReturns) {
  ASSERT_NO_FATAL_FAILURE(StartOnACaughtUpStandby(3, absl::Seconds(5)));

  // Every chart is answered while the standby is down, the first maybe by a
  // retry on the primary, the rest by the primary directly.
  ASSERT_OK(cluster_->Stop(Server::kStandby));
  Ingest(2);
  for (int i = 0; i < 5; ++i) {
    EXPECT_TRUE(SameAsThePrimary()) << "query " << i;
  }
  EXPECT_TRUE(Eventually([&] {
    return Chart(*with_standby_).ok() &&
           Figure(*with_standby_, kUnreachable) > 0;
  }));
  EXPECT_EQ(Figure(*with_standby_, kLagging), 0);

  // Back and caught up, it serves reads again.
  ASSERT_OK(cluster_->Start(Server::kStandby));
  ASSERT_OK(cluster_->AwaitStandbyCaughtUp(absl::Seconds(30)));
  EXPECT_TRUE(ReadsGoToTheStandby());
  EXPECT_TRUE(SameAsThePrimary());
}

TEST_F(StandbyReadsTest, AnExportReadsTheStandbyAndThePrimaryOnceTheStandbyStops) {
  ASSERT_NO_FATAL_FAILURE(StartOnACaughtUpStandby(3, absl::Hours(1)));
  Standby("pg_wal_replay_pause()");
  Ingest(2);
  // The standby's data: 3 batches.
  ASSERT_OK_AND_ASSIGN(int64_t from_standby, ExportedLines(*with_standby_));
  EXPECT_EQ(from_standby, 3 * kReportsPerBatch * kRealisticValuesPerReport);
  ASSERT_OK_AND_ASSIGN(int64_t from_primary, ExportedLines(*primary_only_));
  EXPECT_EQ(from_primary, 5 * kReportsPerBatch * kRealisticValuesPerReport);
  // Once the standby stops, the export is the primary's: all 5 (the
  // series listing that starts it finds the standby gone first).
  ASSERT_OK(cluster_->Stop(Server::kStandby));
  ASSERT_OK_AND_ASSIGN(int64_t after_stop, ExportedLines(*with_standby_));
  EXPECT_EQ(after_stop, 5 * kReportsPerBatch * kRealisticValuesPerReport);
}

TEST_F(StandbyReadsTest, ChartsStayOnTheStandbyWhileThePrimaryIsDown) {
  ASSERT_NO_FATAL_FAILURE(StartOnACaughtUpStandby(3, absl::Seconds(5)));
  ASSERT_OK_AND_ASSIGN(const v1::QuerySeriesResponse before,
                       Chart(*with_standby_));
  const double unreachable = Figure(*with_standby_, kUnreachable);

  // The lag cannot be measured without the primary; the standby is the
  // only server that can answer, and it does.
  ASSERT_OK(cluster_->Stop(Server::kPrimary));
  EXPECT_TRUE(Eventually([&] {
    return Figure(*with_standby_, "metricsd_standby_lag_seconds") == -1;
  }));
  for (int i = 0; i < 3; ++i) {
    absl::StatusOr<v1::QuerySeriesResponse> chart = Chart(*with_standby_);
    ASSERT_TRUE(chart.ok()) << "query " << i << ": " << chart.status();
    EXPECT_TRUE(MessageDifferencer::Equals(*chart, before)) << "query " << i;
  }
  EXPECT_EQ(Figure(*with_standby_, kUnreachable), unreachable);
}

TEST_F(StandbyReadsTest, WithoutAStandbyNoStandbyFiguresAreExported) {
  EXPECT_EQ(Figure(*primary_only_, kStandbyReads), -1);
  EXPECT_EQ(Figure(*primary_only_, kLagging), -1);
}

// The readiness check tells a primary from a standby: a URL that reaches
// the standby is not ready (nothing would commit there), and the primary's
// state counts its standby, asynchronous here, as no synchronous one.
TEST_F(StandbyReadsTest, TheReadinessCheckTellsAPrimaryFromAStandby) {
  ASSERT_OK(cluster_->AwaitStandbyCaughtUp(absl::Seconds(10)));
  storage::pg::PgMetricStoreOptions on_standby;
  on_standby.database_url = Url(Server::kStandby);
  auto standby = storage::pg::PgMetricStore::Create(on_standby);
  const absl::Status checked = standby->CheckDatabase();
  EXPECT_EQ(checked.code(), absl::StatusCode::kFailedPrecondition) << checked;
  EXPECT_TRUE(absl::StrContains(checked.message(), "target_session_attrs=read-write"));
  EXPECT_TRUE(standby->GetDatabaseServerState().reached);
  EXPECT_FALSE(standby->GetDatabaseServerState().primary);
  standby->Shutdown(absl::Now() + absl::Seconds(5));

  storage::pg::PgMetricStoreOptions on_primary;
  on_primary.database_url = Url(Server::kPrimary);
  auto primary = storage::pg::PgMetricStore::Create(on_primary);
  ASSERT_OK(primary->CheckDatabase());
  const storage::DatabaseServerState state = primary->GetDatabaseServerState();
  EXPECT_TRUE(state.reached && state.primary);
  EXPECT_EQ(state.sync_standbys, 0);
  EXPECT_TRUE(state.standby_lag_seconds.has_value());
  primary->Shutdown(absl::Now() + absl::Seconds(5));
}

}  // namespace
}  // namespace metrics::test_util
