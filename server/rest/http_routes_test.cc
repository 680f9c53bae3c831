// The REST routes as read from the protos' google.api.http annotations, and
// the mapping of paths, query parameters and bodies onto request messages.
#include "server/rest/http_routes.h"

#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "proto/determined/api/v1/profiler.pb.h"
#include "proto/metrics/v1/ingest.pb.h"
#include "proto/metrics/v1/query.pb.h"
#include "proto/metrics/v1/trials.pb.h"

namespace metrics::server {
namespace {

using ::metrics::test_util::StatusIs;
using ::testing::HasSubstr;

RouteTable Routes() {
  // Through the generated messages, so their files are linked in.
  absl::StatusOr<RouteTable> table = RouteTable::Build(
      {v1::Trial::descriptor()->file()->FindServiceByName("TrialService"),
       v1::ReportSystemMetricsRequest::descriptor()->file()->FindServiceByName(
           "IngestService"),
       v1::QuerySeriesRequest::descriptor()->file()->FindServiceByName(
           "QueryService"),
       determined::api::v1::GetTrialProfilerMetricsRequest::descriptor()
           ->file()
           ->FindServiceByName("Determined")});
  EXPECT_OK(table.status());
  return *std::move(table);
}

std::string MethodOf(const RouteTable& routes, absl::string_view verb,
                     absl::string_view path) {
  absl::StatusOr<RouteMatch> m = routes.Match(verb, path, nullptr);
  return m.ok() ? m->route->method->full_name() : m.status().ToString();
}

TEST(HttpRoutesTest, EveryAnnotatedMethodHasItsDesignedPath) {
  const RouteTable routes = Routes();
  EXPECT_EQ(routes.routes().size(), 16u);  // all but the bidirectional stream
  EXPECT_EQ(MethodOf(routes, "POST", "/api/v1/trials"),
            "metrics.v1.TrialService.CreateTrial");
  EXPECT_EQ(MethodOf(routes, "GET", "/api/v1/trials"),
            "metrics.v1.TrialService.ListTrials");
  EXPECT_EQ(MethodOf(routes, "GET", "/api/v1/trials/7"),
            "metrics.v1.TrialService.GetTrial");
  EXPECT_EQ(MethodOf(routes, "PATCH", "/api/v1/trials/7"),
            "metrics.v1.TrialService.UpdateTrial");
  EXPECT_EQ(MethodOf(routes, "POST", "/api/v1/trials/7/metrics/system"),
            "metrics.v1.IngestService.ReportSystemMetrics");
  EXPECT_EQ(MethodOf(routes, "GET", "/api/v1/trials/7/metrics/system"),
            "metrics.v1.QueryService.QuerySeries");
  EXPECT_EQ(MethodOf(routes, "GET", "/api/v1/trials/7/metrics/system/series"),
            "metrics.v1.QueryService.ListSeries");
  EXPECT_EQ(MethodOf(routes, "GET", "/api/v1/trials/7/metrics/system/follow"),
            "metrics.v1.QueryService.FollowSeries");
  EXPECT_EQ(MethodOf(routes, "GET", "/api/v1/trials/7/metrics/system/export.csv"),
            "metrics.v1.QueryService.ExportSamples");
  EXPECT_EQ(MethodOf(routes, "GET", "/api/v1/trials/7/metrics/system/trace"),
            "metrics.v1.QueryService.ExportTrace");
  EXPECT_EQ(MethodOf(routes, "GET", "/api/v1/metrics/system/summary"),
            "metrics.v1.QueryService.SummarizeSeries");
  EXPECT_EQ(MethodOf(routes, "GET", "/api/v1/trials/7/profiler/metrics"),
            "determined.api.v1.Determined.GetTrialProfilerMetrics");
  EXPECT_EQ(
      MethodOf(routes, "GET", "/api/v1/trials/7/profiler/available_series"),
      "determined.api.v1.Determined.GetTrialProfilerAvailableSeries");
  // The literal "profiler" wins over the {trial_id} variable.
  EXPECT_EQ(MethodOf(routes, "POST", "/api/v1/trials/profiler/metrics"),
            "determined.api.v1.Determined.PostTrialProfilerMetricsBatch");
  EXPECT_EQ(MethodOf(routes, "POST", "/api/v1/trials/7/metrics"),
            "determined.api.v1.Determined.ReportTrialMetrics");
  EXPECT_EQ(MethodOf(routes, "GET", "/api/v1/trials/metrics/trial_metrics"),
            "determined.api.v1.Determined.GetMetrics");
}

TEST(HttpRoutesTest, UnknownPathsAndMethods) {
  const RouteTable routes = Routes();
  std::string allowed;
  EXPECT_THAT(routes.Match("GET", "/api/v1/nope", &allowed),
              StatusIs(absl::StatusCode::kNotFound));
  EXPECT_THAT(routes.Match("DELETE", "/api/v1/trials/7", &allowed),
              StatusIs(absl::StatusCode::kUnimplemented));
  EXPECT_EQ(allowed, "GET, HEAD, PATCH");
  ASSERT_OK_AND_ASSIGN(RouteMatch head,
                       routes.Match("HEAD", "/api/v1/trials/7", nullptr));
  EXPECT_EQ(head.route->http_method, "GET");
}

TEST(HttpRoutesTest, QueryParametersFillTheRequest) {
  const RouteTable routes = Routes();
  ASSERT_OK_AND_ASSIGN(
      RouteMatch match,
      routes.Match("GET", "/api/v1/trials/7/metrics/system", nullptr));
  v1::QuerySeriesRequest request;
  ASSERT_OK(BuildRequest(match, "",
                         {{"name", "gpu_util"},
                          {"name", "cpu_util_simple"},
                          {"gpu_uuid", "GPU-0"},
                          {"maxPoints", "500"},
                          {"start", "2024-01-18T20:47:45.681Z"}},
                         &request));
  EXPECT_EQ(request.trial_id(), 7);
  EXPECT_THAT(request.name(), ::testing::ElementsAre("gpu_util", "cpu_util_simple"));
  EXPECT_EQ(request.gpu_uuid(0), "GPU-0");
  ASSERT_TRUE(request.has_max_points());
  EXPECT_EQ(request.max_points(), 500);
  EXPECT_EQ(request.start().seconds(), 1705610865);
  EXPECT_EQ(request.start().nanos(), 681000000);

  v1::QuerySeriesRequest bad;
  EXPECT_THAT(BuildRequest(match, "", {{"start", "yesterday"}}, &bad),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("query parameter \"start\"")));
  EXPECT_THAT(BuildRequest(match, "", {{"labels.name", "x"}}, &bad),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("\"labels\" is not a field")));
}

TEST(HttpRoutesTest, NestedPathVariablesAndEnums) {
  const RouteTable routes = Routes();
  ASSERT_OK_AND_ASSIGN(
      RouteMatch match,
      routes.Match("GET", "/api/v1/trials/3/profiler/metrics", nullptr));
  determined::api::v1::GetTrialProfilerMetricsRequest request;
  ASSERT_OK(BuildRequest(
      match, "",
      {{"labels.agentId", "agent-1"},
       {"labels.metric_type", "PROFILER_METRIC_TYPE_TIMING"},
       {"follow", "true"}},
      &request));
  EXPECT_EQ(request.labels().trial_id(), 3);
  EXPECT_EQ(request.labels().agent_id(), "agent-1");
  EXPECT_EQ(request.labels().metric_type(),
            determined::trial::v1::TrialProfilerMetricLabels::
                PROFILER_METRIC_TYPE_TIMING);
  EXPECT_TRUE(request.follow());
  EXPECT_THAT(BuildRequest(match, "", {{"labels.metricType", "SOMETIMES"}},
                           &request),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("PROFILER_METRIC_TYPE_SYSTEM")));
}

TEST(HttpRoutesTest, BodyAndPathTogether) {
  const RouteTable routes = Routes();
  ASSERT_OK_AND_ASSIGN(
      RouteMatch match,
      routes.Match("POST", "/api/v1/trials/9/metrics/system", nullptr));
  v1::ReportSystemMetricsRequest request;
  ASSERT_OK(BuildRequest(match,
                         R"({"streamId":"s","batch":{"sequence":"3","agentId":"a"}})",
                         {}, &request));
  EXPECT_EQ(request.stream_id(), "s");
  EXPECT_EQ(request.batch().trial_id(), 9);
  EXPECT_EQ(request.batch().sequence(), 3);
  EXPECT_THAT(BuildRequest(match, R"({"batch":{"sequence":"x"}})", {}, &request),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("request body")));
  EXPECT_THAT(BuildRequest(match, "{}", {{"streamId", "s"}}, &request),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("request body")));
}

TEST(HttpRoutesTest, ThePlatformsRouteTakesItsHarnesssBody) {
  const RouteTable routes = Routes();
  ASSERT_OK_AND_ASSIGN(RouteMatch match,
                       routes.Match("POST", "/api/v1/trials/7/metrics", nullptr));
  // The harness repeats the path's trial in the body, and writes Python's
  // NaN.
  determined::api::v1::ReportTrialMetricsRequest request;
  ASSERT_OK(BuildRequest(match,
                         R"({"metrics": {"trialId": 7, "metrics": {"avgMetrics": {"a": NaN}}},
                             "group": "cpu"})",
                         {}, &request));
  EXPECT_EQ(request.metrics().trial_id(), 7);
  EXPECT_EQ(request.metrics().metrics().avg_metrics().fields().at("a").string_value(), "NaN");
  // Without it in the body, the path's.
  determined::api::v1::ReportTrialMetricsRequest bare;
  ASSERT_OK(BuildRequest(match, R"({"group": "cpu"})", {}, &bare));
  EXPECT_EQ(bare.metrics().trial_id(), 7);
  // Another trial in the body than in the path is refused.
  determined::api::v1::ReportTrialMetricsRequest other;
  EXPECT_THAT(BuildRequest(match, R"({"metrics": {"trialId": 8}, "group": "cpu"})", {}, &other),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("\"metrics.trialId\": is not the value the request's path "
                                 "gives it")));
  // Other routes keep the strict rule, for equal values too.
  ASSERT_OK_AND_ASSIGN(RouteMatch system,
                       routes.Match("POST", "/api/v1/trials/9/metrics/system", nullptr));
  v1::ReportSystemMetricsRequest strict;
  EXPECT_THAT(BuildRequest(system, R"({"batch": {"trialId": 9}})", {}, &strict),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("set by the request's path")));
  EXPECT_THAT(BuildRequest(system, R"({"streamId": NaN})", {}, &strict),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("not valid JSON")));
}

}  // namespace
}  // namespace metrics::server
