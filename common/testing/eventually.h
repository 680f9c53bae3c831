// Waiting in a test for what another thread or process does, without a
// fixed sleep: Eventually polls a condition until it holds or a time limit
// passes, and the test asserts on its result.
//
//   ASSERT_TRUE(test_util::Eventually(
//       [&] { return RowCount("metrics_profiling") == 1; }, absl::Seconds(20)));
//
// Thread-safety: test-only; a function of its arguments.
#ifndef METRICS_COMMON_TESTING_EVENTUALLY_H_
#define METRICS_COMMON_TESTING_EVENTUALLY_H_

#include "absl/functional/function_ref.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace metrics::test_util {

// Calls `condition` every `every` until it returns true (then true), or
// until `timeout` has passed (then false; the condition was called once
// more at the end).
inline bool Eventually(absl::FunctionRef<bool()> condition,
                       absl::Duration timeout,
                       absl::Duration every = absl::Milliseconds(20)) {
  const absl::Time deadline = absl::Now() + timeout;
  while (absl::Now() < deadline) {
    if (condition()) return true;
    absl::SleepFor(every);
  }
  return condition();
}

}  // namespace metrics::test_util

#endif  // METRICS_COMMON_TESTING_EVENTUALLY_H_
