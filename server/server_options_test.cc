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

TEST(ServerOptionsTest, MemoryBoundsMustLeaveRoomToWork) {
  ServerOptions options;
  options.max_exports = 0;
  EXPECT_THAT(CheckServerOptions(options),
              StatusIs(absl::StatusCode::kInvalidArgument, "--max-exports 0: must be at least 1"));
  options.max_exports = 1;
  options.store.writer.max_cached_series = 0;
  EXPECT_THAT(CheckServerOptions(options),
              StatusIs(absl::StatusCode::kInvalidArgument, "--series-cache 0: must be at least 1"));
  options.store.writer.max_cached_series = 10;
  options.max_message_bytes = 1000;
  EXPECT_THAT(CheckServerOptions(options),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "--grpc-max-message-bytes 1000: must be at least 1048576"));
  options.max_message_bytes = 1 << 20;
  options.grpc_memory_bytes = 1 << 20;
  EXPECT_THAT(CheckServerOptions(options),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "--grpc-memory 1048576: must be at least 67108864"));
  options.grpc_memory_bytes = size_t{64} << 20;
  EXPECT_OK(CheckServerOptions(options));
}

}  // namespace
}  // namespace metrics::server
