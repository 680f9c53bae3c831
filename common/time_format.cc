#include "common/time_format.h"

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

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

absl::StatusOr<absl::Duration> ParseRawRetentionPeriod(absl::string_view text) {
  const std::optional<absl::Duration> d = ParseDurationWithDays(text);
  if (!d || *d <= absl::ZeroDuration() || *d == absl::InfiniteDuration()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--raw-retention ", text,
                     ": must be a positive duration such as 30d or 720h"));
  }
  return *d;
}

}  // namespace metrics::common
