#include "server/server_options.h"

#include "absl/strings/str_cat.h"
#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace metrics::server {
namespace {

using ::metrics::test_util::StatusIs;

TEST(ServerOptionsTest, RawRetentionIsAPositiveDurationOrForever) {
  ASSERT_OK_AND_ASSIGN(absl::Duration forever, ParseRawRetention(""));
  EXPECT_EQ(forever, absl::InfiniteDuration());
  ASSERT_OK_AND_ASSIGN(absl::Duration month, ParseRawRetention("30d"));
  EXPECT_EQ(month, absl::Hours(24 * 30));
  for (const char* bad : {"0d", "-1h", "inf", "soon"}) {
    EXPECT_THAT(ParseRawRetention(bad),
                StatusIs(absl::StatusCode::kInvalidArgument,
                         absl::StrCat("--raw-retention ", bad,
                                      ": must be a positive duration such as "
                                      "30d or 720h")));
  }
}

TEST(ServerOptionsTest, AuthIsRequiredOrOff) {
  ASSERT_OK_AND_ASSIGN(bool required, ParseAuthRequired("required"));
  EXPECT_TRUE(required);
  ASSERT_OK_AND_ASSIGN(bool off, ParseAuthRequired("off"));
  EXPECT_FALSE(off);
  EXPECT_THAT(ParseAuthRequired("on"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "--auth on: must be \"required\" or \"off\""));
}

TEST(ServerOptionsTest, LagAndStalenessMustBePositive) {
  ServerOptions options;
  ASSERT_OK(CheckServerOptions(options));  // the defaults
  options.store.read.max_lag = absl::ZeroDuration();
  EXPECT_THAT(CheckServerOptions(options),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "--max-read-lag 0: must be a positive duration such "
                       "as 5s"));
  options.store.read.max_lag = absl::InfiniteDuration();
  EXPECT_THAT(CheckServerOptions(options),
              StatusIs(absl::StatusCode::kInvalidArgument));
  options.store.read.max_lag = absl::Seconds(5);
  options.stale_after = absl::Seconds(-1);
  EXPECT_THAT(CheckServerOptions(options),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "--stale-after -1s: must be positive"));
}

}  // namespace
}  // namespace metrics::server
