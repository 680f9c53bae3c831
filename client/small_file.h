// Reading a small /proc, /sys or cgroup file whole: one open and read, no
// stream buffering (the job's share reads dozens of them a second).
//
// Thread-safety: a free function; safe from any thread.
#ifndef METRICS_CLIENT_SMALL_FILE_H_
#define METRICS_CLIENT_SMALL_FILE_H_

#include <string>

#include "absl/status/statusor.h"

namespace metrics::client {

// NOT_FOUND naming `path` when it cannot be opened or read.
absl::StatusOr<std::string> ReadSmallFile(const std::string& path);

}  // namespace metrics::client

#endif  // METRICS_CLIENT_SMALL_FILE_H_
