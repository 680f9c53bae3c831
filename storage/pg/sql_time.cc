#include "storage/pg/sql_time.h"

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"

namespace metrics::storage::pg {

std::string EpochMicrosSql(absl::string_view timestamp) {
  return absl::StrCat("(extract(epoch FROM ", timestamp,
                      ") * 1000000)::bigint");
}

std::string TimestampFromMicrosSql(absl::string_view micros) {
  return absl::StrCat("(timestamptz 'epoch' + ", micros,
                      " * interval '1 microsecond')");
}

std::string TimestampText(int64_t micros) {
  return absl::FormatTime("%Y-%m-%d %H:%M:%E6S+00",
                          absl::FromUnixMicros(micros), absl::UTCTimeZone());
}

}  // namespace metrics::storage::pg
