// Times as people and APIs read them: RFC 3339 in UTC with as many
// fractional digits as needed ("2026-11-22T05:30:00.123Z"), for messages.
//
// Thread-safety: pure function.
#ifndef METRICS_COMMON_TIME_FORMAT_H_
#define METRICS_COMMON_TIME_FORMAT_H_

#include <string>

#include "absl/time/time.h"

namespace metrics::common {

std::string Rfc3339(absl::Time t);

}  // namespace metrics::common

#endif  // METRICS_COMMON_TIME_FORMAT_H_
