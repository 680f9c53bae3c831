#include "server/server_options.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/time_format.h"

namespace metrics::server {

absl::StatusOr<absl::Duration> ParseRawRetention(absl::string_view text) {
  if (text.empty()) return absl::InfiniteDuration();
  return common::ParseRawRetentionPeriod(text);
}

absl::StatusOr<bool> ParseAuthRequired(absl::string_view text) {
  if (text == "required") return true;
  if (text == "off") return false;
  return absl::InvalidArgumentError(
      absl::StrCat("--auth ", text, ": must be \"required\" or \"off\""));
}

absl::Status CheckServerOptions(const ServerOptions& options) {
  const absl::Duration lag = options.store.read.max_lag;
  if (lag <= absl::ZeroDuration() || lag == absl::InfiniteDuration()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--max-read-lag ", absl::FormatDuration(lag),
                     ": must be a positive duration such as 5s"));
  }
  if (options.stale_after <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--stale-after ", absl::FormatDuration(options.stale_after),
                     ": must be positive"));
  }
  for (const auto& [flag, value] :
       {std::pair<const char*, absl::Duration>("--auth-recheck",
                                               options.auth_recheck),
        {"--auth-failure-refill", options.auth_failure_refill}}) {
    if (value <= absl::ZeroDuration() || value == absl::InfiniteDuration()) {
      return absl::InvalidArgumentError(
          absl::StrCat(flag, " ", absl::FormatDuration(value),
                       ": must be a positive duration such as 1s"));
    }
  }
  if (options.auth_failure_burst < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--auth-failure-burst ", options.auth_failure_burst,
                     ": must be 0 (no limit) or more"));
  }
  if (options.auth_refused_lifetime < absl::ZeroDuration()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--auth-refused-lifetime ",
        absl::FormatDuration(options.auth_refused_lifetime),
        ": must not be negative"));
  }
  return absl::OkStatus();
}

}  // namespace metrics::server
