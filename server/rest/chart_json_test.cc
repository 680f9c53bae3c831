// The chart JSON writer: exact millisecond times and valid JSON.
#include "server/rest/chart_json.h"

#include <google/protobuf/struct.pb.h>
#include <google/protobuf/util/json_util.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "proto/metrics/v1/query.pb.h"

namespace metrics::server {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

TEST(ChartJsonTest, TimesAreExactMilliseconds) {
  v1::QuerySeriesResponse answer;
  v1::SeriesBuckets* s = answer.add_series();
  s->mutable_series()->set_name("gpu_util");
  s->set_resolution_us(10000000);
  for (int64_t us : {1705610865681000LL, 1705610865681234LL, 1705610865681230LL}) {
    s->add_bucket_start_us(us);
    s->add_count(1);
    s->add_min(0.1);
    s->add_max(97.5);
    s->add_mean(3);
    s->add_first_time_us(us);
    s->add_first_value(1e-7);
    s->add_last_time_us(us);
    s->add_last_value(-2);
  }
  std::string json;
  AppendChartJson(json, answer);
  EXPECT_THAT(json, HasSubstr("\"resolutionMs\":10000,"));
  EXPECT_THAT(json, HasSubstr(
                        "\"bucketStartMs\":[1705610865681,1705610865681.234,"
                        "1705610865681.23]"));
  EXPECT_THAT(json, HasSubstr("\"max\":[97.5,97.5,97.5]"));
  EXPECT_THAT(json, HasSubstr("\"firstValue\":[1e-07,1e-07,1e-07]"));
  // It is JSON: protobuf's parser reads it as a Struct.
  google::protobuf::Struct parsed;
  EXPECT_TRUE(google::protobuf::util::JsonStringToMessage(json, &parsed).ok());
}

// The page's view: min, max and mean on a grid, null for an empty bucket,
// 6 significant digits; raw points keep their times.
TEST(ChartJsonTest, TheChartViewIsCompact) {
  v1::QuerySeriesResponse answer;
  answer.set_view(v1::QuerySeriesRequest::CHART);
  v1::SeriesBuckets* s = answer.add_series();
  s->mutable_series()->set_name("gpu_util");
  s->set_resolution_us(10000000);
  for (int64_t i : {0, 1, 3}) {
    s->add_bucket_start_us(1705610860000000 + i * 10000000);
    s->add_min(1.0 / 3);
    s->add_max(100);
    s->add_mean(1234567.89);
  }
  v1::SeriesBuckets* raw = answer.add_series();
  raw->set_resolution_us(0);
  raw->add_bucket_start_us(1705610865681234);
  raw->add_min(552);
  raw->add_max(552);
  raw->add_mean(552);
  raw->add_last_time_us(1705610865681234);
  std::string json;
  AppendChartJson(json, answer);
  EXPECT_THAT(json, HasSubstr("\"view\":\"CHART\""));
  EXPECT_THAT(json, Not(HasSubstr("rawExpired")));
  // Retention removed the raw points: said in either view.
  answer.set_raw_expired(true);
  for (auto view : {v1::QuerySeriesRequest::CHART, v1::QuerySeriesRequest::FULL}) {
    answer.set_view(view);
    std::string expired;
    AppendChartJson(expired, answer);
    EXPECT_THAT(expired, HasSubstr("\"rawExpired\":true,")) << view;
  }
  EXPECT_THAT(json, HasSubstr(
      "\"resolutionMs\":10000,\"firstBucketMs\":1705610860000,"
      "\"min\":[0.333333,0.333333,null,0.333333],\"max\":[100,100,null,100],"
      "\"mean\":[1.23457e+06,1.23457e+06,null,1.23457e+06]}"));
  EXPECT_THAT(json, HasSubstr(
      "\"resolutionMs\":0,\"lastSampleMs\":1705610865681.234,"
      "\"bucketStartMs\":[1705610865681.234],"
      "\"min\":[552],\"max\":[552],\"mean\":[552]}"));
  EXPECT_THAT(json, Not(HasSubstr("count")));
  google::protobuf::Struct parsed;
  EXPECT_TRUE(google::protobuf::util::JsonStringToMessage(json, &parsed).ok());

  // Starts off the grid or out of order (not from the engine) keep their
  // times rather than being misplaced.
  s->set_bucket_start_us(2, 1705610860000001);
  json.clear();
  AppendChartJson(json, answer);
  EXPECT_THAT(json, HasSubstr("\"resolutionMs\":10000,\"bucketStartMs\":["));
}

// A mean whose bucket's sum overflowed is infinite (two samples of 1.6e308
// do it); JSON has no infinity or NaN, so such a value is null, a gap, and
// the answer still parses (found by fuzz/chart_json_fuzz).
// A summary's series say what they pool, and in relative time their origin;
// a chart answer's do not carry those fields.
TEST(ChartJsonTest, ASummarysSeriesNameTheirTrialAndOrigin) {
  v1::QuerySeriesResponse answer;
  answer.set_view(v1::QuerySeriesRequest::CHART);
  v1::SeriesBuckets* s = answer.add_series();
  s->mutable_series()->set_name("gpu_util");
  s->mutable_series()->set_trial_id(7);
  s->mutable_series()->set_gpu_count(16);
  s->mutable_series()->set_agent_count(2);
  s->set_origin_us(1705610860000000);
  s->set_resolution_us(10000000);
  s->add_bucket_start_us(1705610860000000);
  s->add_min(0);
  s->add_max(100);
  s->add_mean(50);
  s->add_last_time_us(1705610861000000);
  std::string json;
  AppendChartJson(json, answer);
  EXPECT_THAT(json, HasSubstr("\"sampleCount\":0,\"trialId\":7,\"gpuCount\":16,\"agentCount\":2}"));
  EXPECT_THAT(json, HasSubstr("\"resolutionMs\":10000,\"originMs\":1705610860000,"));
  google::protobuf::Struct parsed;
  EXPECT_TRUE(google::protobuf::util::JsonStringToMessage(json, &parsed).ok());

  s->mutable_series()->set_trial_id(0);
  s->set_origin_us(0);
  json.clear();
  AppendChartJson(json, answer);
  EXPECT_THAT(json, Not(HasSubstr("trialId")));
  EXPECT_THAT(json, Not(HasSubstr("originMs")));
}

// The rounding is printf's "%.6g" to the character: at powers of ten, at
// the switch to exponents, at halves, for tiny and huge values.
TEST(ChartJsonTest, RoundedValuesArePrintfs6SignificantDigits) {
  std::vector<double> values = {0.0, -0.0, 1.0, 100.0, 999999.5, 1e6, 1e-4, 1e-5,
                                123456.5, 0.1 + 0.2, 5e-324, 1.7976931348623157e308,
                                -37.52345, 2.5e-7};
  std::mt19937_64 random(7);
  for (int i = 0; i < 100000; ++i) {
    uint64_t bits = random();
    double v;
    std::memcpy(&v, &bits, sizeof v);
    if (std::isfinite(v)) values.push_back(v);
    values.push_back(std::ldexp(static_cast<double>(random() % 2000000) - 1000000,
                                static_cast<int>(random() % 80) - 60));
  }
  for (double v : values) {
    char expected[64];
    std::snprintf(expected, sizeof expected, "%.6g", v);
    std::string got;
    AppendRounded(got, v);
    ASSERT_EQ(got, expected) << std::hexfloat << v;
  }
}

TEST(ChartJsonTest, ValuesThatAreNotFiniteAreNull) {
  v1::QuerySeriesResponse answer;
  v1::SeriesBuckets* s = answer.add_series();
  s->set_resolution_us(10000000);
  s->add_bucket_start_us(1705610860000000);
  s->add_count(2);
  s->add_min(1.5e308);
  s->add_max(-std::numeric_limits<double>::infinity());
  s->add_mean(std::numeric_limits<double>::infinity());
  s->add_first_value(std::numeric_limits<double>::quiet_NaN());
  std::string json;
  AppendChartJson(json, answer);
  EXPECT_THAT(json, HasSubstr("\"min\":[1.5e+308]"));
  EXPECT_THAT(json, HasSubstr("\"max\":[null]"));
  EXPECT_THAT(json, HasSubstr("\"mean\":[null]"));
  EXPECT_THAT(json, HasSubstr("\"firstValue\":[null]"));
  google::protobuf::Struct parsed;
  EXPECT_TRUE(google::protobuf::util::JsonStringToMessage(json, &parsed).ok())
      << json;
}

}  // namespace
}  // namespace metrics::server
