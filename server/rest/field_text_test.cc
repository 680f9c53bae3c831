#include "server/rest/field_text.h"

#include <google/protobuf/wrappers.pb.h>

#include <cmath>
#include <vector>

#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "absl/strings/str_cat.h"
#include "proto/metrics/v1/query.pb.h"
#include "server/rest/json_body.h"

namespace metrics::server {
namespace {

using ::metrics::test_util::StatusIs;
using ::testing::HasSubstr;

const google::protobuf::FieldDescriptor* ValueField(
    const google::protobuf::Message& m) {
  return m.GetDescriptor()->FindFieldByName("value");
}

TEST(FieldTextTest, StrictNumberTexts) {
  EXPECT_TRUE(IsPlainInteger("-12"));
  EXPECT_FALSE(IsPlainInteger("+12"));
  EXPECT_FALSE(IsPlainInteger(" 12"));
  EXPECT_FALSE(IsPlainInteger("0x10"));
  EXPECT_FALSE(IsPlainInteger("-"));
  EXPECT_TRUE(IsJsonNumber("-0.5e+3"));
  EXPECT_FALSE(IsJsonNumber("01"));
  EXPECT_FALSE(IsJsonNumber("1."));
  EXPECT_FALSE(IsJsonNumber("nan"));
  EXPECT_FALSE(IsJsonNumber("inf"));
}

// What a body refuses, a path or query value is refused for too, and the
// other way round: the same rules at every door.
TEST(FieldTextTest, APathOrQueryValueIsRefusedAsTheBodyRefusesIt) {
  struct Case {
    const char* body_value;  // as written in {"value": ...}
    const char* url_value;   // as written in ?value=...
    const char* refused;
  };
  for (const Case& c : std::vector<Case>{
           {"1e400", "1e400", "is not a finite number"},
           {"-1e400", "-1e400", "is not a finite number"},
           {"\"nan\"", "nan", "is not a finite number"},
           {"\"inf\"", "inf", "is not a finite number"},
           {"\"0x10\"", "0x10", "is not a finite number"},
           {"\" 1\"", " 1", "is not a finite number"},
       }) {
    google::protobuf::DoubleValue from_body;
    EXPECT_THAT(ParseJsonBody(absl::StrCat("{\"value\": ", c.body_value, "}"),
                              {}, &from_body),
                StatusIs(absl::StatusCode::kInvalidArgument,
                         HasSubstr(c.refused)))
        << c.body_value;
    google::protobuf::DoubleValue from_url;
    EXPECT_THAT(SetFieldFromText(&from_url, ValueField(from_url), c.url_value,
                                 TextForm::kUrl),
                StatusIs(absl::StatusCode::kInvalidArgument,
                         HasSubstr(c.refused)))
        << c.url_value;
  }
  // A float's range, in both.
  google::protobuf::FloatValue f;
  EXPECT_THAT(ParseJsonBody(R"({"value": 3.5e38})", {}, &f),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("out of range for a float")));
  EXPECT_THAT(SetFieldFromText(&f, ValueField(f), "3.5e38", TextForm::kUrl),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("\"3.5e38\" is out of range for a float")));
  // The mapping's names for what a number cannot write, in both.
  google::protobuf::DoubleValue named;
  ASSERT_OK(SetFieldFromText(&named, ValueField(named), "NaN", TextForm::kUrl));
  EXPECT_TRUE(std::isnan(named.value()));
  ASSERT_OK(ParseJsonBody(R"({"value": "-Infinity"})", {}, &named));
  EXPECT_EQ(named.value(), -HUGE_VAL);
}

TEST(FieldTextTest, EachFormTakesWhatTheMappingAllows) {
  google::protobuf::Int32Value i;
  // A JSON number may write a whole number so; text may not.
  ASSERT_OK(SetFieldFromText(&i, ValueField(i), "1e3", TextForm::kJsonLiteral));
  EXPECT_EQ(i.value(), 1000);
  EXPECT_THAT(SetFieldFromText(&i, ValueField(i), "1e3", TextForm::kUrl),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("\"1e3\" is not an int32")));
  EXPECT_THAT(SetFieldFromText(&i, ValueField(i), "2147483648", TextForm::kUrl),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("is not an int32")));
  google::protobuf::UInt64Value u;
  EXPECT_THAT(SetFieldFromText(&u, ValueField(u), "-1", TextForm::kJsonString),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("is not a uint64")));
  // NaN is a string's name in the mapping, not a number.
  google::protobuf::DoubleValue d;
  EXPECT_THAT(SetFieldFromText(&d, ValueField(d), "NaN", TextForm::kJsonLiteral),
              StatusIs(absl::StatusCode::kInvalidArgument));
  google::protobuf::BoolValue b;
  ASSERT_OK(SetFieldFromText(&b, ValueField(b), "true", TextForm::kUrl));
  EXPECT_TRUE(b.value());
  EXPECT_THAT(SetFieldFromText(&b, ValueField(b), "yes", TextForm::kUrl),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("\"yes\" is not true or false")));
  google::protobuf::BytesValue bytes;
  ASSERT_OK(SetFieldFromText(&bytes, ValueField(bytes), "aGk=", TextForm::kUrl));
  EXPECT_EQ(bytes.value(), "hi");
  EXPECT_THAT(SetFieldFromText(&bytes, ValueField(bytes), "*", TextForm::kUrl),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("is not base64")));
}

TEST(FieldTextTest, RefusedTimeTextAddsNoElement) {
  v1::QuerySeriesRequest request;
  const auto* start = request.GetDescriptor()->FindFieldByName("start");
  EXPECT_THAT(SetFieldFromText(&request, start, "yesterday", TextForm::kUrl),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("\"yesterday\" is not an RFC 3339 time")));
  EXPECT_FALSE(request.has_start());
  ASSERT_OK(SetFieldFromText(&request, start, "2024-01-18T20:47:45.681Z",
                             TextForm::kUrl));
  EXPECT_EQ(request.start().seconds(), 1705610865);
}

}  // namespace
}  // namespace metrics::server
