// Times as people and APIs read them: RFC 3339 in UTC with as many
// fractional digits as needed ("2026-11-22T05:30:00.123Z"), for messages;
// and durations as operators write them on command lines.
//
// Thread-safety: pure functions.
#ifndef METRICS_COMMON_TIME_FORMAT_H_
#define METRICS_COMMON_TIME_FORMAT_H_

#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace metrics::common {

std::string Rfc3339(absl::Time t);

// absl's durations ("36h", "90m", "1h30m"), plus whole days ("30d", up to
// 100 years); nullopt for anything else.
std::optional<absl::Duration> ParseDurationWithDays(absl::string_view text);

// A raw-data retention period, as metricsd and metricsctl take it: such a
// duration, positive and finite. INVALID_ARGUMENT naming --raw-retention
// otherwise.
absl::StatusOr<absl::Duration> ParseRawRetentionPeriod(absl::string_view text);

}  // namespace metrics::common

#endif  // METRICS_COMMON_TIME_FORMAT_H_
