// Times the tests share: a deadline for a call to the store or a service,
// and the instant the storage tests' data starts at. Test files compiled in
// one unity batch (CMakeLists.txt, metrics_add_test_to) use these instead
// of each defining its own.
//
// Thread-safety: constants and a pure function; safe from any thread.
#ifndef METRICS_COMMON_TESTING_TEST_TIME_H_
#define METRICS_COMMON_TESTING_TEST_TIME_H_

#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace metrics::test_util {

// Thirty seconds from now: far past what a passing call takes.
inline absl::Time Deadline() { return absl::Now() + absl::Seconds(30); }

// 2025-11-22 08:26:40 UTC.
inline const absl::Time kT0 = absl::FromUnixSeconds(1763800000);

}  // namespace metrics::test_util

#endif  // METRICS_COMMON_TESTING_TEST_TIME_H_
