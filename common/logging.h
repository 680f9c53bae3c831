// A minimal line logger: one timestamped line per notable event on stderr.
// Abseil 20220623 (Debian 12) has no absl/log, and the service needs no more
// than levels and atomic lines.
//
// Thread-safety: thread-safe; each call writes one whole line.
#ifndef METRICS_COMMON_LOGGING_H_
#define METRICS_COMMON_LOGGING_H_

#include "absl/strings/string_view.h"

#include "absl/strings/str_cat.h"

namespace metrics::common {

enum class LogLevel { kInfo, kWarning, kError };

// Writes "<RFC 3339 time> <level> <message>\n" to stderr in one write.
void LogLine(LogLevel level, absl::string_view message);

template <typename... Args>
void LogInfo(const Args&... args) {
  LogLine(LogLevel::kInfo, absl::StrCat(args...));
}
template <typename... Args>
void LogWarning(const Args&... args) {
  LogLine(LogLevel::kWarning, absl::StrCat(args...));
}
template <typename... Args>
void LogError(const Args&... args) {
  LogLine(LogLevel::kError, absl::StrCat(args...));
}

}  // namespace metrics::common

#endif  // METRICS_COMMON_LOGGING_H_
