#include "common/time_format.h"

namespace metrics::common {

std::string Rfc3339(absl::Time t) {
  return absl::FormatTime("%Y-%m-%dT%H:%M:%E*SZ", t, absl::UTCTimeZone());
}

}  // namespace metrics::common
