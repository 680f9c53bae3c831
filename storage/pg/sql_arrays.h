// PostgreSQL arrays built from C++ vectors, to pass many rows as a few
// parameters of one statement (unnest($1::int[], $2::text[])), since
// libpqxx 6.4 has no array parameters: text literals ("{1,2,3}",
// "{\"a\",\"b\"}"), and bytea[] in binary. Also bytea's hex text, which
// COPY takes and reads return.
//
// Thread-safety: pure functions.
#ifndef METRICS_STORAGE_PG_SQL_ARRAYS_H_
#define METRICS_STORAGE_PG_SQL_ARRAYS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"

namespace metrics::storage::pg {

std::string IntArray(const std::vector<int64_t>& values);
std::string TextArray(const std::vector<std::string>& values);
// Bytes as bytea's hex input ("\x0a0b"), for COPY and parameters.
std::string ByteaHex(absl::string_view bytes);
// A bytea[] in PostgreSQL's binary array format (array_recv's input), to
// pass as a binary parameter (pqxx::binarystring): neither side turns the
// bytes into hex and back.
std::string ByteaArrayBinary(const std::vector<std::string>& values);

// Decodes bytea's hex output ("\x0a0b") to bytes; empty on malformed input.
std::string DecodeByteaHex(absl::string_view text);
// The same into `out`, whose buffer a caller decoding many rows reuses;
// false (and `out` empty) on malformed input.
bool DecodeByteaHexInto(absl::string_view text, std::string& out);

}  // namespace metrics::storage::pg

#endif  // METRICS_STORAGE_PG_SQL_ARRAYS_H_
