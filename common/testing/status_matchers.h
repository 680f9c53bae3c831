// GoogleTest helpers for absl::Status: ASSERT_OK / EXPECT_OK print the
// Status on failure, ASSERT_OK_AND_ASSIGN unwraps a StatusOr, and
// StatusIs(code) / StatusIs(code, message_matcher) match a Status or the
// status of a StatusOr.
//
// Thread-safety: test-only; as GoogleTest.
#ifndef METRICS_COMMON_TESTING_STATUS_MATCHERS_H_
#define METRICS_COMMON_TESTING_STATUS_MATCHERS_H_

#include <ostream>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace metrics::test_util {

inline const absl::Status& GetStatus(const absl::Status& status) {
  return status;
}
template <typename T>
const absl::Status& GetStatus(const absl::StatusOr<T>& status_or) {
  return status_or.status();
}

// Matches an absl::Status or absl::StatusOr whose code is `code` and whose
// message matches `message`.
class StatusIsMatcher {
 public:
  StatusIsMatcher(absl::StatusCode code,
                  ::testing::Matcher<const std::string&> message)
      : code_(code), message_(std::move(message)) {}

  template <typename T>
  bool MatchAndExplain(const T& arg,
                       ::testing::MatchResultListener* listener) const {
    const absl::Status& status = GetStatus(arg);
    *listener << "whose status is " << status;
    return status.code() == code_ &&
           message_.MatchAndExplain(std::string(status.message()), listener);
  }
  void DescribeTo(std::ostream* os) const {
    *os << "has code " << absl::StatusCodeToString(code_)
        << " and a message that ";
    message_.DescribeTo(os);
  }
  void DescribeNegationTo(std::ostream* os) const {
    *os << "does not have code " << absl::StatusCodeToString(code_)
        << " or has a message that ";
    message_.DescribeNegationTo(os);
  }

 private:
  absl::StatusCode code_;
  ::testing::Matcher<const std::string&> message_;
};

template <typename MessageMatcher>
::testing::PolymorphicMatcher<StatusIsMatcher> StatusIs(
    absl::StatusCode code, MessageMatcher message) {
  return ::testing::MakePolymorphicMatcher(StatusIsMatcher(
      code, ::testing::SafeMatcherCast<const std::string&>(message)));
}

inline ::testing::PolymorphicMatcher<StatusIsMatcher> StatusIs(
    absl::StatusCode code) {
  return StatusIs(code, ::testing::_);
}

}  // namespace metrics::test_util

#define ASSERT_OK(expr)                                               \
  do {                                                                \
    const auto& metrics_assert_status_ = (expr);                      \
    ASSERT_TRUE(::metrics::test_util::GetStatus(metrics_assert_status_).ok()) \
        << ::metrics::test_util::GetStatus(metrics_assert_status_);     \
  } while (false)

#define EXPECT_OK(expr)                                               \
  do {                                                                \
    const auto& metrics_expect_status_ = (expr);                      \
    EXPECT_TRUE(::metrics::test_util::GetStatus(metrics_expect_status_).ok()) \
        << ::metrics::test_util::GetStatus(metrics_expect_status_);     \
  } while (false)

#define METRICS_TESTING_CONCAT_INNER_(a, b) a##b
#define METRICS_TESTING_CONCAT_(a, b) METRICS_TESTING_CONCAT_INNER_(a, b)

#define ASSERT_OK_AND_ASSIGN(lhs, rexpr)                                  \
  ASSERT_OK_AND_ASSIGN_IMPL_(                                             \
      METRICS_TESTING_CONCAT_(metrics_statusor_, __LINE__), lhs, rexpr)

#define ASSERT_OK_AND_ASSIGN_IMPL_(statusor, lhs, rexpr) \
  auto statusor = (rexpr);                               \
  ASSERT_TRUE(statusor.ok()) << statusor.status();       \
  lhs = *std::move(statusor)

#endif  // METRICS_COMMON_TESTING_STATUS_MATCHERS_H_
