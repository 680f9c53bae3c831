#include "server/http/http_target.h"

#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace metrics::server {
namespace {

using ::metrics::test_util::StatusIs;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Pair;

TEST(HttpTargetTest, DecodesPathAndQuery) {
  ASSERT_OK_AND_ASSIGN(
      RequestTarget t,
      ParseRequestTarget("/a/b%20c?x=1&y=two+words&z=%C3%A9&empty=&flag"));
  EXPECT_EQ(t.path, "/a/b c");
  EXPECT_THAT(t.query, ElementsAre(Pair("x", "1"), Pair("y", "two words"),
                                   Pair("z", "\xC3\xA9"), Pair("empty", ""),
                                   Pair("flag", "")));
}

TEST(HttpTargetTest, PlusIsLiteralInThePath) {
  ASSERT_OK_AND_ASSIGN(RequestTarget t, ParseRequestTarget("/trials/+1"));
  EXPECT_EQ(t.path, "/trials/+1");
}

TEST(HttpTargetTest, AbsoluteFormKeepsOnlyThePath) {
  ASSERT_OK_AND_ASSIGN(RequestTarget t,
                       ParseRequestTarget("http://example.com:8080/x?y=1"));
  EXPECT_EQ(t.path, "/x");
  EXPECT_THAT(t.query, ElementsAre(Pair("y", "1")));
  ASSERT_OK_AND_ASSIGN(t, ParseRequestTarget("HTTP://example.com"));
  EXPECT_EQ(t.path, "/");
}

TEST(HttpTargetTest, RefusesWhatIsNotAPath) {
  EXPECT_THAT(
      ParseRequestTarget("x"),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("starting with")));
  EXPECT_THAT(ParseRequestTarget(""),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(
      ParseRequestTarget("/a#b"),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("fragment")));
}

TEST(HttpTargetTest, RefusesMalformedEscapesControlsAndInvalidUtf8) {
  EXPECT_THAT(ParseRequestTarget("/a%2"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("path: malformed percent-encoding")));
  EXPECT_THAT(ParseRequestTarget("/a%G1"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("path")));
  EXPECT_THAT(ParseRequestTarget("/ui/main.js%00.css"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("path: contains a control character")));
  EXPECT_THAT(ParseRequestTarget("/a%FF%FE"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("path: is not valid UTF-8")));
  EXPECT_THAT(
      ParseRequestTarget("/x?name=%FF%FE"),
      StatusIs(absl::StatusCode::kInvalidArgument,
               HasSubstr("query parameter \"name\": is not valid UTF-8")));
  EXPECT_THAT(
      ParseRequestTarget("/x?name=a%0Ab"),
      StatusIs(absl::StatusCode::kInvalidArgument,
               HasSubstr("query parameter \"name\": contains a control")));
  EXPECT_THAT(
      ParseRequestTarget("/x?%FF=1"),
      StatusIs(absl::StatusCode::kInvalidArgument,
               HasSubstr("a query parameter's name: is not valid UTF-8")));
  EXPECT_THAT(
      ParseRequestTarget("/x?=1"),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("empty name")));
  EXPECT_THAT(ParseRequestTarget("/x?a=%"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("query parameter \"a\": malformed")));
}

TEST(HttpTargetTest, QuoteForMessageEchoesOnlyShortPrintableText) {
  EXPECT_EQ(QuoteForMessage("trialId"), "\"trialId\"");
  EXPECT_EQ(QuoteForMessage("caf\xC3\xA9"), "(a value of 5 bytes)");
  EXPECT_EQ(QuoteForMessage(std::string(65, 'a')), "(a value of 65 bytes)");
}

}  // namespace
}  // namespace metrics::server
