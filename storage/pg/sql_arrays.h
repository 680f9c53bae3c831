// PostgreSQL array literals ("{1,2,3}", "{\"a\",\"b\"}") built from C++
// vectors, to pass many rows as a few parameters of one statement
// (unnest($1::int[], $2::text[])), since libpqxx 6.4 has no array
// parameters. Also the text forms of timestamps and bytea that COPY and
// array literals take.
//
// Thread-safety: pure functions.
#ifndef METRICS_STORAGE_PG_SQL_ARRAYS_H_
#define METRICS_STORAGE_PG_SQL_ARRAYS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace metrics::storage::pg {

std::string IntArray(const std::vector<int64_t>& values);
std::string TextArray(const std::vector<std::string>& values);
// Each element written as bytea hex ("\x0a0b").
std::string ByteaArray(const std::vector<std::string>& values);

// "2026-11-22 05:30:00.123456+00": timestamptz text, microsecond precision.
std::string TimestampText(absl::Time t);

// Decodes bytea's hex output ("\x0a0b") to bytes; empty on malformed input.
std::string DecodeByteaHex(absl::string_view text);

}  // namespace metrics::storage::pg

#endif  // METRICS_STORAGE_PG_SQL_ARRAYS_H_
