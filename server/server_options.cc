#include "server/server_options.h"

#include <tuple>
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
  // The memory bounds (docs/operating.md, "What bounds metricsd's memory").
  for (const auto& [flag, value, least] : {
           std::tuple<const char*, int64_t, int64_t>("--max-exports", options.max_exports, 1),
           {"--series-cache", static_cast<int64_t>(options.store.writer.max_cached_series), 1},
           {"--max-tracked-streams", static_cast<int64_t>(options.store.writer.max_routes), 1},
           {"--grpc-max-message-bytes", options.max_message_bytes, int64_t{1} << 20},
           {"--grpc-memory", static_cast<int64_t>(options.grpc_memory_bytes), int64_t{64} << 20},
       }) {
    if (value < least) {
      return absl::InvalidArgumentError(
          absl::StrCat(flag, " ", value, ": must be at least ", least));
    }
  }
  return absl::OkStatus();
}

}  // namespace metrics::server
