// The query service through gRPC against the real server and PostgreSQL:
// ListSeries, QuerySeries and its errors, and FollowSeries: the current
// answer, then changes within 2 s of their commit, and the end of the
// stream when the trial is marked COMPLETED; exports, whole or left
// halfway by callers that cancel.
#include <grpcpp/client_context.h>

#include <tuple>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "proto/metrics/v1/ingest.grpc.pb.h"
#include "proto/metrics/v1/query.grpc.pb.h"
#include "proto/metrics/v1/trials.grpc.pb.h"
#include "server/services/query_service.h"
#include "storage/pg/testing/pg_checks.h"
#include "tests/testing/report_with_retry.h"
#include "tests/testing/test_server.h"

namespace metrics::server {
namespace {

using ::metrics::test_util::TestServer;
using ::testing::ElementsAre;
using ::testing::ElementsAreArray;
using ::testing::HasSubstr;

const int64_t kNow = absl::ToUnixSeconds(absl::Now());

class QueryServiceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_OK_AND_ASSIGN(server_, TestServer::Start());
    trials_ = v1::TrialService::NewStub(server_->Channel());
    ingest_ = v1::IngestService::NewStub(server_->Channel());
    query_ = v1::QueryService::NewStub(server_->Channel());
    for (int32_t id : {1, 2}) {
      grpc::ClientContext context;
      v1::CreateTrialRequest request;
      request.set_id(id);
      v1::Trial trial;
      ASSERT_TRUE(trials_->CreateTrial(&context, request, &trial).ok());
    }
  }

  // Stores one report of cpu_util_simple (percent) at `seconds`.
  void Report(int32_t trial, int64_t seconds, double value) {
    v1::ReportSystemMetricsRequest request;
    v1::SystemMetricsBatch* batch = request.mutable_batch();
    batch->set_trial_id(trial);
    batch->set_agent_id("agent-a");
    v1::SeriesDeclaration* s = batch->add_series();
    s->set_name("cpu_util_simple");
    s->set_unit("percent");
    v1::SystemMetricsReport* r = batch->add_reports();
    r->mutable_time()->set_seconds(seconds);
    r->add_series(0);
    r->add_values(value);
    grpc::ClientContext context;
    v1::ReportSystemMetricsResponse response;
    grpc::Status status =
        ingest_->ReportSystemMetrics(&context, request, &response);
    ASSERT_TRUE(status.ok()) << status.error_message();
  }

  grpc::Status EndTrial(int32_t id) {
    grpc::ClientContext context;
    v1::UpdateTrialRequest request;
    request.set_trial_id(id);
    request.set_state(v1::Trial::COMPLETED);
    v1::Trial trial;
    return trials_->UpdateTrial(&context, request, &trial);
  }

  std::unique_ptr<grpc::ClientContext> Context(absl::Duration timeout) {
    auto context = std::make_unique<grpc::ClientContext>();
    context->set_deadline(absl::ToChronoTime(absl::Now() + timeout));
    return context;
  }

  std::unique_ptr<TestServer> server_;
  std::unique_ptr<v1::TrialService::Stub> trials_;
  std::unique_ptr<v1::IngestService::Stub> ingest_;
  std::unique_ptr<v1::QueryService::Stub> query_;
};

TEST_F(QueryServiceTest, ListsSeriesAndAnswersQueries) {
  Report(1, kNow - 300, 10);
  Report(1, kNow - 200, 90);
  Report(1, kNow - 100, 30);

  v1::ListSeriesRequest list;
  list.set_trial_id(1);
  v1::ListSeriesResponse series;
  ASSERT_TRUE(query_->ListSeries(Context(absl::Seconds(30)).get(), list, &series).ok());
  ASSERT_EQ(series.series_size(), 1);
  EXPECT_EQ(series.series(0).name(), "cpu_util_simple");
  EXPECT_EQ(series.series(0).unit(), "percent");
  EXPECT_EQ(series.series(0).sample_count(), 3);
  EXPECT_EQ(series.series(0).first_time().seconds(), kNow - 300);
  EXPECT_EQ(series.series(0).last_time().seconds(), kNow - 100);

  v1::QuerySeriesRequest query;
  query.set_trial_id(1);
  v1::QuerySeriesResponse answer;
  ASSERT_TRUE(query_->QuerySeries(Context(absl::Seconds(30)).get(), query, &answer).ok());
  ASSERT_EQ(answer.series_size(), 1);
  const v1::SeriesBuckets& data = answer.series(0);
  EXPECT_EQ(data.resolution_us(), 0);  // few points: raw
  EXPECT_THAT(data.max(), ElementsAre(10, 90, 30));
  EXPECT_THAT(data.bucket_start_us(),
              ElementsAre((kNow - 300) * 1000000, (kNow - 200) * 1000000,
                          (kNow - 100) * 1000000));

  query.set_max_points(1);  // one bucket holding all three, the spike kept
  ASSERT_TRUE(query_->QuerySeries(Context(absl::Seconds(30)).get(), query, &answer).ok());
  ASSERT_EQ(answer.series(0).count_size(), 1);
  EXPECT_EQ(answer.series(0).count(0), 3);
  EXPECT_EQ(answer.series(0).max(0), 90);
  EXPECT_DOUBLE_EQ(answer.series(0).mean(0), 130.0 / 3);
}

// The page's view: the same buckets and values, only the columns a chart
// draws, and the view named in the answer; follow honours it too. A view
// that is neither FULL nor CHART is refused, naming the field.
TEST_F(QueryServiceTest, TheChartViewSendsWhatAChartDrawsAndAnUnknownViewIsRefused) {
  Report(1, kNow - 300, 10);
  Report(1, kNow - 200, 90);
  v1::QuerySeriesRequest query;
  query.set_trial_id(1);
  v1::QuerySeriesResponse full;
  ASSERT_TRUE(query_->QuerySeries(Context(absl::Seconds(30)).get(), query, &full).ok());
  query.set_view(v1::QuerySeriesRequest::CHART);
  v1::QuerySeriesResponse chart;
  ASSERT_TRUE(query_->QuerySeries(Context(absl::Seconds(30)).get(), query, &chart).ok());
  EXPECT_EQ(full.view(), v1::QuerySeriesRequest::FULL);
  EXPECT_EQ(chart.view(), v1::QuerySeriesRequest::CHART);
  ASSERT_EQ(chart.series_size(), 1);
  const v1::SeriesBuckets& f = full.series(0);
  const v1::SeriesBuckets& c = chart.series(0);
  EXPECT_THAT(c.bucket_start_us(), ElementsAreArray(f.bucket_start_us()));
  EXPECT_THAT(c.min(), ElementsAreArray(f.min()));
  EXPECT_THAT(c.max(), ElementsAre(10, 90));
  EXPECT_THAT(c.mean(), ElementsAreArray(f.mean()));
  EXPECT_THAT(c.last_time_us(), ElementsAreArray(f.last_time_us()));
  EXPECT_EQ(c.count_size(), 0);
  EXPECT_EQ(c.first_time_us_size(), 0);
  EXPECT_EQ(c.first_value_size(), 0);
  EXPECT_EQ(c.last_value_size(), 0);

  auto context = Context(absl::Seconds(30));
  auto follow = query_->FollowSeries(context.get(), query);
  v1::QuerySeriesResponse first;
  ASSERT_TRUE(follow->Read(&first));
  EXPECT_EQ(first.view(), v1::QuerySeriesRequest::CHART);
  ASSERT_EQ(first.series_size(), 1);
  EXPECT_EQ(first.series(0).count_size(), 0);
  context->TryCancel();
  while (follow->Read(&first)) {
  }
  (void)follow->Finish();

  query.set_view(static_cast<v1::QuerySeriesRequest::View>(7));
  grpc::Status status =
      query_->QuerySeries(Context(absl::Seconds(30)).get(), query, &chart);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(status.error_message(), HasSubstr("view: 7 is not FULL or CHART"));
  auto refused_context = Context(absl::Seconds(30));
  auto refused = query_->FollowSeries(refused_context.get(), query);
  while (refused->Read(&first)) {
  }
  status = refused->Finish();
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(status.error_message(), HasSubstr("view: 7"));
}

TEST_F(QueryServiceTest, BadQueriesAreRefusedWithTheirCodes) {
  v1::QuerySeriesRequest query;
  query.set_trial_id(1);
  query.mutable_start()->set_seconds(kNow);
  query.mutable_end()->set_seconds(kNow - 10);
  v1::QuerySeriesResponse answer;
  grpc::Status status =
      query_->QuerySeries(Context(absl::Seconds(30)).get(), query, &answer);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(status.error_message(), HasSubstr("is not before end"));

  query.clear_end();
  query.set_max_points(0);
  status = query_->QuerySeries(Context(absl::Seconds(30)).get(), query, &answer);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(status.error_message(), HasSubstr("max_points: 0"));

  query.clear_max_points();
  query.set_trial_id(404);
  status = query_->QuerySeries(Context(absl::Seconds(30)).get(), query, &answer);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::NOT_FOUND);

  v1::ListSeriesRequest list;
  list.set_trial_id(404);
  v1::ListSeriesResponse series;
  EXPECT_EQ(query_->ListSeries(Context(absl::Seconds(30)).get(), list, &series).error_code(),
            grpc::StatusCode::NOT_FOUND);
}

TEST_F(QueryServiceTest, FollowSendsChangesWithinTwoSecondsAndEndsWithTheTrial) {
  Report(1, kNow - 60, 5);
  v1::QuerySeriesRequest request;
  request.set_trial_id(1);
  auto context = Context(absl::Seconds(60));
  auto follow = query_->FollowSeries(context.get(), request);

  v1::QuerySeriesResponse message;
  ASSERT_TRUE(follow->Read(&message));  // the current answer
  ASSERT_EQ(message.series_size(), 1);
  EXPECT_THAT(message.series(0).max(), ElementsAre(5));

  for (double value : {7.0, 11.0}) {
    const absl::Time committed = absl::Now();
    Report(1, kNow - 30 + static_cast<int64_t>(value), value);
    ASSERT_TRUE(follow->Read(&message));
    EXPECT_LT(absl::Now() - committed, absl::Seconds(2));
    ASSERT_EQ(message.series_size(), 1);
    // Only the new point is sent.
    EXPECT_THAT(message.series(0).max(), ElementsAre(value));
  }

  ASSERT_TRUE(EndTrial(1).ok());
  while (follow->Read(&message)) {
  }
  grpc::Status status = follow->Finish();
  EXPECT_TRUE(status.ok()) << status.error_message();
}

// A chart that follows what it has drawn passes its newest bucket's start
// and its resolution: the first message holds that bucket and what came
// since, not the whole window again, and later ones are at that resolution.
TEST_F(QueryServiceTest, AFollowFromTheDrawnEndSendsOnlyWhatCameSince) {
  const int64_t base = (kNow - 600) / 60 * 60;  // a minute's start
  for (int64_t t = 0; t < 300; t += 20) Report(1, base + t, static_cast<double>(t));
  v1::QuerySeriesRequest request;
  request.set_trial_id(1);
  request.mutable_start()->set_seconds(base + 240);
  request.set_resolution_us(60 * 1000000);
  auto context = Context(absl::Seconds(60));
  auto follow = query_->FollowSeries(context.get(), request);
  v1::QuerySeriesResponse message;
  ASSERT_TRUE(follow->Read(&message));
  ASSERT_EQ(message.series_size(), 1);
  EXPECT_EQ(message.series(0).resolution_us(), 60 * 1000000);
  EXPECT_THAT(message.series(0).bucket_start_us(),
              ElementsAre((base + 240) * 1000000));
  EXPECT_THAT(message.series(0).max(), ElementsAre(280));

  Report(1, base + 300, 1000);  // the next minute
  ASSERT_TRUE(follow->Read(&message));
  ASSERT_EQ(message.series_size(), 1);
  EXPECT_THAT(message.series(0).bucket_start_us(),
              ElementsAre((base + 300) * 1000000));
  EXPECT_THAT(message.series(0).max(), ElementsAre(1000));
  context->TryCancel();
  while (follow->Read(&message)) {
  }
  (void)follow->Finish();

  // A resolution the window cannot hold, or without a start, is refused
  // before anything is read.
  for (auto [start, resolution, error] :
       {std::tuple<int64_t, int64_t, const char*>{base, -1, "is negative"},
        {0, 60000000, "needs a start"},
        {base, 1, "more than 10000 buckets"}}) {
    v1::QuerySeriesRequest bad;
    bad.set_trial_id(1);
    if (start != 0) bad.mutable_start()->set_seconds(start);
    bad.set_resolution_us(resolution);
    auto bad_context = Context(absl::Seconds(30));
    auto refused = query_->FollowSeries(bad_context.get(), bad);
    while (refused->Read(&message)) {
    }
    grpc::Status status = refused->Finish();
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << error;
    EXPECT_THAT(status.error_message(), HasSubstr(error));
    v1::QuerySeriesResponse answer;
    status = query_->QuerySeries(Context(absl::Seconds(30)).get(), bad, &answer);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << error;
    EXPECT_THAT(status.error_message(), HasSubstr(error));
  }
}

TEST_F(QueryServiceTest, FollowOfAnEmptyTrialStartsEmptyThenSendsData) {
  v1::QuerySeriesRequest request;
  request.set_trial_id(2);
  auto context = Context(absl::Seconds(60));
  auto follow = query_->FollowSeries(context.get(), request);
  v1::QuerySeriesResponse message;
  ASSERT_TRUE(follow->Read(&message));
  EXPECT_EQ(message.series_size(), 0);

  Report(2, kNow - 10, 42);
  ASSERT_TRUE(follow->Read(&message));
  ASSERT_EQ(message.series_size(), 1);
  EXPECT_THAT(message.series(0).max(), ElementsAre(42));
  context->TryCancel();
  while (follow->Read(&message)) {
  }
  EXPECT_EQ(follow->Finish().error_code(), grpc::StatusCode::CANCELLED);
}

TEST_F(QueryServiceTest, FollowSurvivesTheLossOfTheListeningConnection) {
  Report(1, kNow - 60, 5);
  v1::QuerySeriesRequest request;
  request.set_trial_id(1);
  auto context = Context(absl::Seconds(60));
  auto follow = query_->FollowSeries(context.get(), request);
  v1::QuerySeriesResponse message;
  ASSERT_TRUE(follow->Read(&message));

  // Whatever commits while the notifier reconnects is caught by the resync
  // every follower gets after a reconnect.
  ASSERT_OK_AND_ASSIGN(int killed, storage::pg::test_util::TerminateBackends(
                                       server_->database_url(),
                                       "metricsd-notifier"));
  EXPECT_EQ(killed, 1);
  Report(1, kNow - 30, 8);
  ASSERT_TRUE(follow->Read(&message));
  ASSERT_EQ(message.series_size(), 1);
  EXPECT_THAT(message.series(0).max(), ElementsAre(8));
  context->TryCancel();
  while (follow->Read(&message)) {
  }
  (void)follow->Finish();  // CANCELLED: the test ended it
}

TEST_F(QueryServiceTest, AResyncWithNoDataSendsNothingToAnEmptyFollow) {
  Report(1, kNow - 60, 5);
  v1::QuerySeriesRequest request;
  request.set_trial_id(1);
  auto context1 = Context(absl::Seconds(60));
  auto follow1 = query_->FollowSeries(context1.get(), request);
  request.set_trial_id(2);
  auto context2 = Context(absl::Seconds(60));
  auto follow2 = query_->FollowSeries(context2.get(), request);
  v1::QuerySeriesResponse message;
  ASSERT_TRUE(follow1->Read(&message));
  ASSERT_TRUE(follow2->Read(&message));
  EXPECT_EQ(message.series_size(), 0);

  // The notifier reconnects and calls every follower once. Once trial 1's
  // new point is out, that call has been made for trial 2 too, which has
  // nothing new: it must send nothing, so its next message is the data.
  ASSERT_OK_AND_ASSIGN(int killed, storage::pg::test_util::TerminateBackends(
                                       server_->database_url(),
                                       "metricsd-notifier"));
  EXPECT_EQ(killed, 1);
  Report(1, kNow - 30, 8);
  ASSERT_TRUE(follow1->Read(&message));
  // Not a synchronisation (the test passes whatever the timing when the
  // follower is right): the pause lets a wrong empty message go out first.
  absl::SleepFor(absl::Milliseconds(200));
  Report(2, kNow - 10, 42);
  ASSERT_TRUE(follow2->Read(&message));
  ASSERT_EQ(message.series_size(), 1);
  EXPECT_THAT(message.series(0).max(), ElementsAre(42));
  context1->TryCancel();
  context2->TryCancel();
  while (follow1->Read(&message)) {
  }
  while (follow2->Read(&message)) {
  }
  (void)follow1->Finish();  // CANCELLED: the test ended it
  (void)follow2->Finish();
}

TEST_F(QueryServiceTest, FollowOfAnUnknownTrialIsNotFound) {
  v1::QuerySeriesRequest request;
  request.set_trial_id(404);
  auto context = Context(absl::Seconds(30));
  auto follow = query_->FollowSeries(context.get(), request);
  v1::QuerySeriesResponse message;
  while (follow->Read(&message)) {
  }
  EXPECT_EQ(follow->Finish().error_code(), grpc::StatusCode::NOT_FOUND);
}

TEST_F(QueryServiceTest, ExportsStreamTheFileAndCallersThatLeaveFreeTheirSlots) {
  // 40 000 samples: about 2.4 MB of CSV, several chunks.
  constexpr int kReports = 40000, kPerBatch = 10000;
  for (int b = 0; b < kReports / kPerBatch; ++b) {
    v1::ReportSystemMetricsRequest report;
    v1::SystemMetricsBatch* batch = report.mutable_batch();
    batch->set_trial_id(1);
    batch->set_agent_id("agent-a");
    batch->add_series()->set_name("cpu_util_simple");
    for (int i = b * kPerBatch; i < (b + 1) * kPerBatch; ++i) {
      v1::SystemMetricsReport* r = batch->add_reports();
      r->mutable_time()->set_seconds(kNow - kReports + i);
      r->add_values(i);
    }
    const grpc::Status status =
        test_util::ReportWithRetry(*ingest_, report, absl::Now() + absl::Seconds(60));
    ASSERT_TRUE(status.ok()) << status.error_message();
  }

  v1::ExportSamplesRequest request;
  request.set_trial_id(1);
  auto whole = Context(absl::Seconds(60));
  auto reader = query_->ExportSamples(whole.get(), request);
  v1::ExportChunk chunk;
  std::string csv;
  int chunks = 0;
  while (reader->Read(&chunk)) {
    if (chunks++ == 0) {
      EXPECT_EQ(chunk.content_type(), "text/csv; charset=utf-8");
      EXPECT_EQ(chunk.file_name(), "trial-1-system-metrics.csv");
    } else {
      EXPECT_EQ(chunk.content_type(), "");
    }
    csv += chunk.data();
  }
  ASSERT_TRUE(reader->Finish().ok());
  EXPECT_GT(chunks, 5);
  EXPECT_EQ(std::count(csv.begin(), csv.end(), '\n'), kReports + 1);

  // Callers that leave after the first chunk, more of them than exports may
  // run at once: each export ends and frees its slot.
  for (int i = 0; i < 2 * QueryService::kDefaultMaxExports; ++i) {
    grpc::ClientContext context;
    auto left = query_->ExportSamples(&context, request);
    ASSERT_TRUE(left->Read(&chunk));
    context.TryCancel();
    EXPECT_EQ(left->Finish().error_code(), grpc::StatusCode::CANCELLED);
  }
  // Slots go back as each export's thread sees its caller gone.
  absl::Status last = absl::UnknownError("not tried");
  for (absl::Time deadline = absl::Now() + absl::Seconds(10); absl::Now() < deadline;) {
    auto again = Context(absl::Seconds(60));
    v1::ExportTraceRequest trace;
    trace.set_trial_id(1);
    auto traced = query_->ExportTrace(again.get(), trace);
    std::string json;
    while (traced->Read(&chunk)) json += chunk.data();
    const grpc::Status status = traced->Finish();
    last = status.ok() ? absl::OkStatus() : absl::Status(absl::StatusCode(status.error_code()),
                                                         status.error_message());
    if (status.ok()) {
      EXPECT_THAT(json, HasSubstr("\"system metrics: agent-a\""));
      break;
    }
    absl::SleepFor(absl::Milliseconds(100));
  }
  EXPECT_TRUE(last.ok()) << last;
}

}  // namespace
}  // namespace metrics::server
