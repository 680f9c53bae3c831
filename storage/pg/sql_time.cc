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

namespace {

constexpr int64_t kMicrosPerDay = int64_t{86400} * 1000000;
// 0000-01-01 and 10000-01-01 as microseconds since the Unix epoch.
constexpr int64_t kYear0Micros = int64_t{-719528} * kMicrosPerDay;
constexpr int64_t kYear10000Micros = int64_t{2932897} * kMicrosPerDay;

// Writes `value` in `width` digits at `out`; returns the end.
char* WriteDigits(int64_t value, int width, char* out) {
  for (int i = width - 1; i >= 0; --i) {
    out[i] = static_cast<char>('0' + value % 10);
    value /= 10;
  }
  return out + width;
}

}  // namespace

std::string TimestampText(int64_t micros) {
  std::string out;
  AppendTimestampText(micros, out);
  return out;
}

void AppendTimestampText(int64_t micros, std::string& out) {
  if (micros < kYear0Micros || micros >= kYear10000Micros) {
    out += absl::FormatTime("%Y-%m-%d %H:%M:%E6S+00",
                            absl::FromUnixMicros(micros), absl::UTCTimeZone());
    return;
  }
  int64_t days = micros / kMicrosPerDay;
  int64_t of_day = micros % kMicrosPerDay;
  if (of_day < 0) {
    of_day += kMicrosPerDay;
    --days;
  }
  // The civil date of a day count (the proleptic Gregorian calendar in
  // 400-year eras starting on 0000-03-01).
  const int64_t z = days + 719468;
  const int64_t era = (z >= 0 ? z : z - 146096) / 146097;
  const int64_t doe = z - era * 146097;
  const int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
  const int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
  const int64_t mp = (5 * doy + 2) / 153;
  const int64_t day = doy - (153 * mp + 2) / 5 + 1;
  const int64_t month = mp < 10 ? mp + 3 : mp - 9;
  const int64_t year = yoe + era * 400 + (month <= 2 ? 1 : 0);
  // "YYYY-MM-DD HH:MM:SS.ffffff+00", formatted here and appended at once.
  char text[32];
  char* at = WriteDigits(year, 4, text);
  *at++ = '-';
  at = WriteDigits(month, 2, at);
  *at++ = '-';
  at = WriteDigits(day, 2, at);
  *at++ = ' ';
  const int64_t seconds = of_day / 1000000;
  at = WriteDigits(seconds / 3600, 2, at);
  *at++ = ':';
  at = WriteDigits(seconds / 60 % 60, 2, at);
  *at++ = ':';
  at = WriteDigits(seconds % 60, 2, at);
  *at++ = '.';
  at = WriteDigits(of_day % 1000000, 6, at);
  *at++ = '+';
  *at++ = '0';
  *at++ = '0';
  out.append(text, static_cast<size_t>(at - text));
}

}  // namespace metrics::storage::pg
