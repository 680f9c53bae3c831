// WithConnectionOptions: what libpq reads back from the string it makes.
#include "storage/pg/connection.h"

#include <libpq-fe.h>

#include <map>
#include <string>

#include "common/testing/status_matchers.h"
#include "gtest/gtest.h"

namespace metrics::storage::pg {
namespace {

// The options libpq parses out of `text`, by keyword.
std::map<std::string, std::string> Parsed(const std::string& text) {
  std::map<std::string, std::string> values;
  PQconninfoOption* parsed = PQconninfoParse(text.c_str(), nullptr);
  EXPECT_NE(parsed, nullptr) << text;
  if (parsed == nullptr) return values;
  for (const PQconninfoOption* o = parsed; o->keyword != nullptr; ++o) {
    if (o->val != nullptr) values[o->keyword] = o->val;
  }
  PQconninfoFree(parsed);
  return values;
}

TEST(WithConnectionOptionsTest, KeepsEveryPartOfAUriAndAddsTheOptions) {
  ASSERT_OK_AND_ASSIGN(
      std::string text,
      WithConnectionOptions(
          "postgresql://me:p%27a%5Css%20w@db.example:6543/metrics?sslmode=require",
          {{"connect_timeout", "3"}, {"sslmode", "verify-full"}}));
  const std::map<std::string, std::string> expected = {
      {"user", "me"},          {"password", "p'a\\ss w"}, {"host", "db.example"},
      {"port", "6543"},        {"dbname", "metrics"},     {"sslmode", "verify-full"},
      {"connect_timeout", "3"}};
  EXPECT_EQ(Parsed(text), expected);
}

TEST(WithConnectionOptionsTest, EmptyMeansTheEnvironmentPlusTheOptions) {
  ASSERT_OK_AND_ASSIGN(std::string text,
                       WithConnectionOptions("", {{"tcp_user_timeout", "3000"}}));
  EXPECT_EQ(Parsed(text), (std::map<std::string, std::string>{{"tcp_user_timeout", "3000"}}));
}

TEST(WithConnectionOptionsTest, AnUnparsableUrlIsInvalidArgument) {
  absl::StatusOr<std::string> text = WithConnectionOptions("host='unclosed", {});
  EXPECT_EQ(text.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(text.status().message().find("database URL: "), std::string::npos);
}

}  // namespace
}  // namespace metrics::storage::pg
