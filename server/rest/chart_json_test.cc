// The chart JSON writer: exact millisecond times and valid JSON.
#include "server/rest/chart_json.h"

#include <google/protobuf/struct.pb.h>
#include <google/protobuf/util/json_util.h>

#include <limits>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "proto/metrics/v1/query.pb.h"

namespace metrics::server {
namespace {

using ::testing::HasSubstr;

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

// A mean whose bucket's sum overflowed is infinite (two samples of 1.6e308
// do it); JSON has no infinity or NaN, so such a value is null, a gap, and
// the answer still parses (found by fuzz/chart_json_fuzz).
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
