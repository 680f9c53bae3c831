#include "storage/pg/pg_errors.h"

#include <pqxx/except>

#include <stdexcept>

#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace metrics::storage::pg {
namespace {

using ::metrics::test_util::StatusIs;
using ::testing::Eq;
using ::testing::HasSubstr;

template <typename E>
absl::Status Map(const E& exception) {
  return GuardPg("reading series", [&]() -> absl::Status { throw exception; });
}

TEST(PgErrorsTest, ConnectionRefusedIsUnavailableOnOneLineNamingTheServer) {
  absl::Status status = Map(pqxx::broken_connection(
      "connection to server at \"127.0.0.1\", port 5999 failed: Connection "
      "refused\n\tIs the server running on that host and accepting TCP/IP "
      "connections?\n"));
  EXPECT_THAT(status,
              StatusIs(absl::StatusCode::kUnavailable,
                       Eq("reading series: connection to server at "
                          "\"127.0.0.1\", port 5999 failed: Connection "
                          "refused Is the server running on that host and "
                          "accepting TCP/IP connections?")));
}

TEST(PgErrorsTest, FailedPasswordIsPermissionDenied) {
  EXPECT_THAT(Map(pqxx::broken_connection(
                  "FATAL:  password authentication failed for user \"x\"\n")),
              StatusIs(absl::StatusCode::kPermissionDenied,
                       HasSubstr("password authentication failed")));
}

TEST(PgErrorsTest, SqlStatesMapToTheirCodes) {
  struct Case {
    const char* sqlstate;
    absl::StatusCode code;
  };
  for (const Case& c : {
           Case{"40001", absl::StatusCode::kAborted},
           Case{"40P01", absl::StatusCode::kAborted},
           Case{"55P03", absl::StatusCode::kAborted},
           Case{"57014", absl::StatusCode::kDeadlineExceeded},
           Case{"42501", absl::StatusCode::kPermissionDenied},
           Case{"23505", absl::StatusCode::kAlreadyExists},
           Case{"42P01", absl::StatusCode::kFailedPrecondition},
           Case{"53300", absl::StatusCode::kResourceExhausted},
           Case{"57P01", absl::StatusCode::kUnavailable},
           Case{"22P02", absl::StatusCode::kInvalidArgument},
           Case{"XX000", absl::StatusCode::kInternal},
       }) {
    EXPECT_THAT(Map(pqxx::sql_error("ERROR:  boom\n", "SELECT 1", c.sqlstate)),
                StatusIs(c.code, Eq("reading series: ERROR: boom")))
        << c.sqlstate;
  }
}

TEST(PgErrorsTest, AFullDiskSaysSoFirst) {
  EXPECT_THAT(Map(pqxx::sql_error(
                  "ERROR:  could not extend file \"base/16384/16549\": No space left "
                  "on device\nHINT:  Check free disk space.\n",
                  "COPY metrics_profiling", "53100")),
              StatusIs(absl::StatusCode::kResourceExhausted,
                       Eq("reading series: the database server's disk is full: ERROR: "
                          "could not extend file \"base/16384/16549\": No space left on "
                          "device HINT: Check free disk space.")));
}

TEST(PgErrorsTest, InDoubtCommitIsUnknown) {
  EXPECT_THAT(Map(pqxx::in_doubt_error("lost connection during commit")),
              StatusIs(absl::StatusCode::kUnknown));
}

TEST(PgErrorsTest, OtherExceptionsAreInternal) {
  EXPECT_THAT(Map(std::runtime_error("bad")),
              StatusIs(absl::StatusCode::kInternal, Eq("reading series: bad")));
}

TEST(PgErrorsTest, ValuesPassThroughUntouched) {
  absl::StatusOr<int> result =
      GuardPg("counting", []() -> absl::StatusOr<int> { return 7; });
  ASSERT_OK(result);
  EXPECT_EQ(*result, 7);
}

}  // namespace
}  // namespace metrics::storage::pg
