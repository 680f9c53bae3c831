#include "common/time_format.h"

#include "absl/strings/numbers.h"

namespace metrics::common {

std::string Rfc3339(absl::Time t) {
  return absl::FormatTime("%Y-%m-%dT%H:%M:%E*SZ", t, absl::UTCTimeZone());
}

std::optional<absl::Duration> ParseDurationWithDays(absl::string_view text) {
  if (!text.empty() && text.back() == 'd') {
    int64_t days = 0;
    if (!absl::SimpleAtoi(text.substr(0, text.size() - 1), &days) ||
        days <= 0 || days > 100 * 365) {
      return std::nullopt;
    }
    return absl::Hours(24 * days);
  }
  absl::Duration d;
  if (!absl::ParseDuration(text, &d)) return std::nullopt;
  return d;
}

}  // namespace metrics::common
