#include "server/rest/json_body.h"

#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
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

}  // namespace
}  // namespace metrics::server
