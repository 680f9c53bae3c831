// Maps libpqxx and standard exceptions to absl::Status, so exceptions never
// leave storage/pg or migrations/. Every public entry point that touches
// PostgreSQL runs its body through GuardPg, which catches and maps.
//
// Codes: connection lost or refused UNAVAILABLE; too many connections or
// out of resources RESOURCE_EXHAUSTED; serialization failure, deadlock or
// lock timeout ABORTED; statement timeout DEADLINE_EXCEEDED; missing table or column
// FAILED_PRECONDITION (schema missing or old); insufficient privilege
// PERMISSION_DENIED; unique violation ALREADY_EXISTS; bad data
// INVALID_ARGUMENT; commit outcome unknown UNKNOWN; anything else INTERNAL.
//
// Thread-safety: pure functions.
#ifndef METRICS_STORAGE_PG_PG_ERRORS_H_
#define METRICS_STORAGE_PG_PG_ERRORS_H_

#include <exception>
#include "absl/strings/string_view.h"
#include <type_traits>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace metrics::storage::pg {

// What a full disk's error (SQLSTATE 53100, "could not extend file ...: No
// space left on device") says first, after the operation: an operator's
// words for it, and what callers look for.
inline constexpr absl::string_view kDiskFull = "the database server's disk is full";

// Maps the exception being handled to a Status whose message is
// "<operation>: <PostgreSQL's message on one line>" (for a full disk,
// "<operation>: <kDiskFull>: <PostgreSQL's message>").
// REQUIRES: called inside a catch block.
absl::Status StatusFromCurrentException(absl::string_view operation);

// Runs `body` (returning absl::Status or absl::StatusOr<T>) and turns any
// exception it throws into a Status naming `operation`.
template <typename Body>
auto GuardPg(absl::string_view operation, Body&& body) -> decltype(body()) {
  try {
    return body();
  } catch (...) {
    return StatusFromCurrentException(operation);
  }
}

}  // namespace metrics::storage::pg

#endif  // METRICS_STORAGE_PG_PG_ERRORS_H_
