#include "server/server_options.h"

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
  return absl::OkStatus();
}

}  // namespace metrics::server
