#include "storage/pg/pg_errors.h"

#include <pqxx/except>

#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"

namespace metrics::storage::pg {

namespace {

// libpq messages span lines ("...failed: Connection refused\n\tIs the server
// running...") and pad with spaces ("ERROR:  x"); a Status message is one
// line with single spaces.
std::string OneLine(absl::string_view text) {
  return absl::StrJoin(
      absl::StrSplit(text, absl::ByAnyChar(" \n\t\r"), absl::SkipEmpty()),
      " ");
}

absl::StatusCode CodeForSqlState(absl::string_view state) {
  // Serialization failure, deadlock, a lock not taken within lock_timeout.
  if (state == "40001" || state == "40P01" || state == "55P03") {
    return absl::StatusCode::kAborted;
  }
  if (state == "57014") return absl::StatusCode::kDeadlineExceeded;
  if (state == "42501") return absl::StatusCode::kPermissionDenied;
  if (state == "23505") return absl::StatusCode::kAlreadyExists;
  if (state == "42P01" || state == "42703" || state == "42883" ||
      state == "3F000") {
    return absl::StatusCode::kFailedPrecondition;
  }
  if (absl::StartsWith(state, "28")) return absl::StatusCode::kPermissionDenied;
  if (absl::StartsWith(state, "53")) {
    return absl::StatusCode::kResourceExhausted;
  }
  // 08: connection exception; 57P0x: server shutting down or starting up.
  if (absl::StartsWith(state, "08") || absl::StartsWith(state, "57P")) {
    return absl::StatusCode::kUnavailable;
  }
  if (absl::StartsWith(state, "22") || absl::StartsWith(state, "23")) {
    return absl::StatusCode::kInvalidArgument;
  }
  return absl::StatusCode::kInternal;
}

absl::StatusCode CodeForConnectionFailure(absl::string_view message) {
  // libpq reports authentication and missing-database failures as connection
  // failures without a SQLSTATE; they will not heal by retrying.
  if (absl::StrContains(message, "authentication failed") ||
      absl::StrContains(message, "permission denied") ||
      absl::StrContains(message, "no pg_hba.conf entry")) {
    return absl::StatusCode::kPermissionDenied;
  }
  if (absl::StrContains(message, "does not exist")) {
    return absl::StatusCode::kFailedPrecondition;
  }
  return absl::StatusCode::kUnavailable;
}

}  // namespace

absl::Status StatusFromCurrentException(absl::string_view operation) {
  auto make = [operation](absl::StatusCode code, absl::string_view what) {
    return absl::Status(code, absl::StrCat(operation, ": ", OneLine(what)));
  };
  try {
    throw;
  } catch (const pqxx::too_many_connections& e) {
    return make(absl::StatusCode::kResourceExhausted, e.what());
  } catch (const pqxx::broken_connection& e) {
    return make(CodeForConnectionFailure(e.what()), e.what());
  } catch (const pqxx::in_doubt_error& e) {
    return make(absl::StatusCode::kUnknown, e.what());
  } catch (const pqxx::sql_error& e) {
    if (e.sqlstate() == "53100") {
      return make(absl::StatusCode::kResourceExhausted,
                  absl::StrCat(kDiskFull, ": ", e.what()));
    }
    return make(CodeForSqlState(e.sqlstate()), e.what());
  } catch (const pqxx::usage_error& e) {
    return make(absl::StatusCode::kInternal, e.what());
  } catch (const std::exception& e) {
    return make(absl::StatusCode::kInternal, e.what());
  } catch (...) {
    return make(absl::StatusCode::kInternal, "unknown exception");
  }
}

}  // namespace metrics::storage::pg
