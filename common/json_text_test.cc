#include "common/json_text.h"

#include <cstdlib>

#include "gtest/gtest.h"

namespace metrics::common {
namespace {

TEST(JsonTextTest, QuotesAndEscapes) {
  std::string out;
  AppendJsonString(out, "a\"b\\c\nd\x01");
  EXPECT_EQ(out, "\"a\\\"b\\\\c\\nd\\u0001\"");
}

TEST(JsonTextTest, NumbersAreShortestAndRoundTrip) {
  for (double v : {0.0, 1.0, -2.5, 0.1, 1e300, 123456789.123456789,
                   5e-324, 2.2250738585072014e-308}) {
    std::string out;
    AppendJsonNumber(out, v);
    EXPECT_EQ(std::strtod(out.c_str(), nullptr), v) << out;
  }
  std::string out;
  AppendJsonNumber(out, 0.1);
  EXPECT_EQ(out, "0.1");
}

}  // namespace
}  // namespace metrics::common
