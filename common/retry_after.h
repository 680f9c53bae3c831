// A refusal's hint of how long its caller should wait before trying again,
// carried in the absl::Status itself (a payload), so that the layer that
// refuses (an address limited by the authenticator, an agent whose rows
// wait for the sealer) names the wait and the door that answers (gRPC's
// "retry-after-ms" trailer, HTTP's Retry-After) passes it on.
//
// Thread-safety: pure functions.
#ifndef METRICS_COMMON_RETRY_AFTER_H_
#define METRICS_COMMON_RETRY_AFTER_H_

#include <optional>

#include "absl/status/status.h"
#include "absl/time/time.h"

namespace metrics::common {

// `status` asking its caller to wait `wait` (whole milliseconds, at least
// one).
absl::Status WithRetryAfter(absl::Status status, absl::Duration wait);

// The wait a refusal asks for; nullopt when it names none.
std::optional<absl::Duration> RetryAfterOf(const absl::Status& status);

}  // namespace metrics::common

#endif  // METRICS_COMMON_RETRY_AFTER_H_
