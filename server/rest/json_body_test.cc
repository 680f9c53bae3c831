#include "server/rest/json_body.h"

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
using ::testing::ElementsAre;
using ::testing::HasSubstr;

absl::Status Parse(absl::string_view json, google::protobuf::Message* m,
                   const std::vector<FieldPath>& bound = {}) {
  return ParseJsonBody(json, bound, m);
}

TEST(JsonBodyTest, MapsTheProto3JsonForms) {
  v1::ReportSystemMetricsRequest r;
  ASSERT_OK(Parse(R"({"streamId": "s\u00e9\ud83d\ude00", "batch": {
      "sequence": "12", "trial_id": 7, "agentId": "a",
      "series": [{"name": "cpu", "unit": "percent"}],
      "reports": [{"time": "2026-01-01T00:00:01.5Z", "series": [0, 1e0],
                   "values": [1.5, -2e3, "NaN", "3"]}]}})",
                  &r));
  EXPECT_EQ(r.stream_id(), "s\xC3\xA9\xF0\x9F\x98\x80");
  EXPECT_EQ(r.batch().sequence(), 12);
  EXPECT_EQ(r.batch().trial_id(), 7);
  EXPECT_EQ(r.batch().reports(0).time().nanos(), 500000000);
  EXPECT_THAT(r.batch().reports(0).series(), ElementsAre(0u, 1u));
  EXPECT_EQ(r.batch().reports(0).values(1), -2000);
  EXPECT_TRUE(std::isnan(r.batch().reports(0).values(2)));
  EXPECT_EQ(r.batch().reports(0).values(3), 3);
}

TEST(JsonBodyTest, EmptyBodyAndNullsAreDefaults) {
  v1::UpdateTrialRequest u;
  ASSERT_OK(Parse("  ", &u));
  ASSERT_OK(Parse(R"({"state": null})", &u));
  EXPECT_EQ(u.state(), v1::Trial::STATE_UNSPECIFIED);
  ASSERT_OK(Parse(R"({"state": "COMPLETED"})", &u));
  EXPECT_EQ(u.state(), v1::Trial::COMPLETED);
}

TEST(JsonBodyTest, RefusesWhatIsNotStrictJson) {
  v1::CreateTrialRequest c;
  for (const char* bad :
       {"{'id': 1}", "{id: 1}", "{\"id\": 1,}", "{\"id\": 01}", "{\"id\": +1}",
        "{\"id\": 1} x", "{\"id\": 1 // c\n}", "{\"id\": .5}", "[1]", "1",
        "{\"id\": \"\\x41\"}", "{\"id\": \"a\tb\"}", "{\"id\": tru}"}) {
    EXPECT_THAT(Parse(bad, &c), StatusIs(absl::StatusCode::kInvalidArgument,
                                         HasSubstr("request body")))
        << bad;
  }
  EXPECT_THAT(Parse("{\"id\": \"\xFF\"}", &c),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("is not valid UTF-8")));
  EXPECT_THAT(Parse(R"({"id": 1, "id": 2})", &c),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("\"id\": is given twice")));
}

TEST(JsonBodyTest, SyntaxErrorsSayWhereAndWhat) {
  v1::CreateTrialRequest c;
  EXPECT_THAT(Parse("{\"id\": 1} x", &c),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("not valid JSON at byte 10: unexpected text "
                                 "after the value")));
  EXPECT_OK(Parse("{\"id\": 1} \n", &c));
  v1::UpdateTrialRequest u;
  EXPECT_THAT(Parse(R"({"state": "\ud800"})", &u),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("lone high surrogate")));
  EXPECT_THAT(Parse(R"({"state": "\udc00"})", &u),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("not valid JSON")));
  EXPECT_THAT(Parse(R"({"state": "A)", &u),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("not valid JSON")));
  std::string deep;
  for (int i = 0; i < 100; ++i) deep += "{\"a\": ";
  EXPECT_THAT(Parse(deep, &c), StatusIs(absl::StatusCode::kInvalidArgument,
                                        HasSubstr("request body")));
  EXPECT_THAT(Parse("[1]", &c),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("expected an object, got an array")));
}

TEST(JsonBodyTest, WrongShapesNameTheField) {
  v1::ReportSystemMetricsRequest r;
  EXPECT_THAT(
      Parse(R"({"batch": {"reports": [{"values": [[1]]}]}})", &r),
      StatusIs(absl::StatusCode::kInvalidArgument,
               HasSubstr("\"batch.reports[0].values[0]\": expected a number, "
                         "got an array")));
  EXPECT_THAT(Parse(R"({"batch": {"reports": [{"values": 5}]}})", &r),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("\"batch.reports[0].values\": expected an "
                                 "array, got a number")));
  EXPECT_THAT(Parse(R"({"batch": {"reports": {}}})", &r),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("expected an array, got an object")));
  EXPECT_THAT(Parse(R"({"batch": {"trialId": 2147483648}})", &r),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("\"batch.trialId\": \"2147483648\" is not an "
                                 "int32")));
  EXPECT_THAT(Parse(R"({"batch": {"reports": [{"series": [-1]}]}})", &r),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("is not a uint32")));
  EXPECT_THAT(Parse(R"({"batch": {"reports": [{"time": 5}]}})", &r),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("expected an RFC 3339 time string")));
  EXPECT_THAT(Parse(R"({"batch": {"reports": [{"values": [null]}]}})", &r),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("null is not allowed in an array")));
  EXPECT_THAT(Parse(R"({"batch": {"color": 1}})", &r),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("\"batch.color\": is not a field of "
                                 "metrics.v1.SystemMetricsBatch")));
  v1::UpdateTrialRequest u;
  EXPECT_THAT(Parse(R"({"state": "DONE"})", &u),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("is not a value of")));
  EXPECT_THAT(Parse(R"({"state": true})", &u),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("expected an enum name, got a boolean")));
}

TEST(JsonBodyTest, OneofMembersAndPathBoundFieldsAreRefused) {
  v1::StreamSystemMetricsRequest s;
  EXPECT_THAT(Parse(R"({"open": {}, "batch": {}})", &s),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("is in oneof message")));
  v1::ReportSystemMetricsRequest r;
  const google::protobuf::Descriptor* d = r.GetDescriptor();
  const FieldPath bound = {
      d->FindFieldByName("batch"),
      d->FindFieldByName("batch")->message_type()->FindFieldByName("trial_id")};
  EXPECT_THAT(Parse(R"({"batch": {"trial_id": 1}})", &r, {bound}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("\"batch.trial_id\": is set by the request's "
                                 "path")));
  EXPECT_OK(Parse(R"({"batch": {"agentId": "a"}})", &r, {bound}));
}

TEST(JsonBodyTest, DeepNestingStopsAtTheFirstWrongShape) {
  v1::ReportSystemMetricsRequest r;
  std::string deep = R"({"batch": {"reports": )";
  for (int i = 0; i < 100000; ++i) deep += "[";
  EXPECT_THAT(Parse(deep, &r),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("\"batch.reports[0]\": expected an object")));
}

TEST(JsonBodyTest, StructFieldsTakeAnyJsonObject) {
  determined::api::v1::ReportTrialMetricsRequest r;
  ASSERT_OK(Parse(R"({"group": "gpu", "metrics": {"trialId": 7, "metrics": {
      "avgMetrics": {"node-1": {"GPU-a": {"gpu_util": 1.5, "on": true, "s": "x",
                                          "none": null, "list": [1, "two", [3], {}]}}},
      "batchMetrics": [{"loss": 1}, {}]}}})",
                  &r));
  const google::protobuf::Struct& avg = r.metrics().metrics().avg_metrics();
  const auto& gpu =
      avg.fields().at("node-1").struct_value().fields().at("GPU-a").struct_value().fields();
  EXPECT_EQ(gpu.at("gpu_util").number_value(), 1.5);
  EXPECT_TRUE(gpu.at("on").bool_value());
  EXPECT_EQ(gpu.at("s").string_value(), "x");
  EXPECT_EQ(gpu.at("none").kind_case(), google::protobuf::Value::kNullValue);
  ASSERT_EQ(gpu.at("list").list_value().values_size(), 4);
  EXPECT_EQ(gpu.at("list").list_value().values(2).list_value().values(0).number_value(), 3);
  ASSERT_EQ(r.metrics().metrics().batch_metrics_size(), 2);
  EXPECT_EQ(r.metrics().metrics().batch_metrics(0).fields().at("loss").number_value(), 1);
  // batchMetrics: null, as the harness of 0.32 and later sends it.
  determined::api::v1::ReportTrialMetricsRequest nulls;
  ASSERT_OK(Parse(R"({"metrics": {"metrics": {"avgMetrics": {}, "batchMetrics": null},
                      "stepsCompleted": null}})",
                  &nulls));
  EXPECT_FALSE(nulls.metrics().has_steps_completed());
}

TEST(JsonBodyTest, StructFieldsRefuseWhatNoStructHolds) {
  for (const auto& [body, words] : std::vector<std::pair<std::string, std::string>>{
           {R"({"metrics": {"metrics": {"avgMetrics": {"a": 1, "a": 2}}}})",
            R"(metrics.metrics.avgMetrics["a"]": is given twice)"},
           {R"({"metrics": {"metrics": {"avgMetrics": {"a": 1e999}}}})", "range of a double"},
           {R"({"metrics": {"metrics": {"avgMetrics": [1]}}})",
            "avgMetrics\": expected an object, got an array"},
           // Without the route's option, Python's bare tokens are no JSON.
           {R"({"metrics": {"metrics": {"avgMetrics": {"a": NaN}}}})", "not valid JSON"},
       }) {
    determined::api::v1::ReportTrialMetricsRequest r;
    EXPECT_THAT(Parse(body, &r), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr(words)))
        << body;
  }
}

TEST(JsonBodyTest, PythonsNonFiniteTokensBecomeThePlatformsStrings) {
  EXPECT_EQ(QuotePythonNonFinite(R"({"a": NaN, "b": [Infinity, -Infinity], "c": "NaN x"})"),
            R"({"a": "NaN", "b": ["Infinity", "-Infinity"], "c": "NaN x"})");
  // Inside strings, escapes included, nothing changes.
  EXPECT_EQ(QuotePythonNonFinite(R"({"a\"NaN": "\" Infinity"})"),
            R"({"a\"NaN": "\" Infinity"})");
  determined::api::v1::ReportTrialMetricsRequest r;
  JsonBodyOptions options;
  options.python_non_finite = true;
  ASSERT_OK(ParseJsonBody(R"({"metrics": {"metrics": {"avgMetrics": {"a": -Infinity}}}})", {},
                          &r, options));
  EXPECT_EQ(r.metrics().metrics().avg_metrics().fields().at("a").string_value(), "-Infinity");
}

TEST(JsonBodyTest, APathFieldMayBeRepeatedWhereTheRouteAllowsIt) {
  determined::api::v1::ReportTrialMetricsRequest r;
  const FieldPath trial = {
      determined::api::v1::ReportTrialMetricsRequest::descriptor()->FindFieldByName("metrics"),
      determined::trial::v1::TrialMetrics::descriptor()->FindFieldByName("trial_id")};
  EXPECT_THAT(Parse(R"({"metrics": {"trialId": 7}})", &r, {trial}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("is set by the request's path")));
  JsonBodyOptions options;
  options.path_fields_may_repeat = true;
  std::vector<FieldPath> repeated;
  ASSERT_OK(ParseJsonBody(R"({"metrics": {"trialId": 7}})", {trial}, &r, options, &repeated));
  EXPECT_THAT(repeated, ElementsAre(trial));
  EXPECT_EQ(r.metrics().trial_id(), 7);
}

}  // namespace
}  // namespace metrics::server
