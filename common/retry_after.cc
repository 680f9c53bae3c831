#include "common/retry_after.h"

#include <algorithm>
#include <cstdint>
#include <string>

#include "absl/strings/cord.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace metrics::common {

namespace {

// The payload's key; its value is the wait in milliseconds, in decimal.
constexpr absl::string_view kRetryAfterPayload = "metrics/retry-after-ms";

}  // namespace

absl::Status WithRetryAfter(absl::Status status, absl::Duration wait) {
  const int64_t ms = std::max<int64_t>(
      1, absl::ToInt64Milliseconds(absl::Ceil(wait, absl::Milliseconds(1))));
  status.SetPayload(kRetryAfterPayload, absl::Cord(absl::StrCat(ms)));
  return status;
}

std::optional<absl::Duration> RetryAfterOf(const absl::Status& status) {
  auto payload = status.GetPayload(kRetryAfterPayload);
  int64_t ms = 0;
  if (!payload || !absl::SimpleAtoi(std::string(*payload), &ms)) {
    return std::nullopt;
  }
  return absl::Milliseconds(ms);
}

}  // namespace metrics::common
