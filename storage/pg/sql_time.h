// The one way storage/pg converts between PostgreSQL's timestamptz and the
// store's times (int64 microseconds since the Unix epoch, see
// storage/metric_store.h): both are microseconds, so each conversion is
// exact. In SQL, EpochMicrosSql reads a timestamptz as microseconds
// (extract returns numeric, with no float rounding) and
// TimestampFromMicrosSql makes one from a bigint; COPY takes TimestampText.
//
// Thread-safety: pure functions.
#ifndef METRICS_STORAGE_PG_SQL_TIME_H_
#define METRICS_STORAGE_PG_SQL_TIME_H_

#include <cstdint>
#include <string>

#include "absl/strings/string_view.h"

namespace metrics::storage::pg {

// The start of year 1 and of year 10000 in microseconds since the epoch:
// bounds before and after every time a report may have (AppendTimestampText
// writes years 0 to 9999; timestamptz starts at 4713 BC).
inline constexpr int64_t kYearOneMicros = -62135596800000000;
inline constexpr int64_t kYearTenThousandMicros = 253402300800000000;

// "(extract(epoch FROM end_time) * 1000000)::bigint" for "end_time".
std::string EpochMicrosSql(absl::string_view timestamp);

// "(timestamptz 'epoch' + $4 * interval '1 microsecond')" for "$4".
std::string TimestampFromMicrosSql(absl::string_view micros);

// "2026-11-22 05:30:00.123456+00": the timestamptz text COPY takes.
std::string TimestampText(int64_t micros);
// The same, appended to `out`; without absl::FormatTime's generality for
// years 0 to 9999 (COPY formats one a report).
void AppendTimestampText(int64_t micros, std::string& out);

}  // namespace metrics::storage::pg

#endif  // METRICS_STORAGE_PG_SQL_TIME_H_
