// ReadinessProbe's options (readiness.h), apart so that what sets them
// (server_options.h) does not parse the store's interfaces.
//
// Thread-safety: a plain value.
#ifndef METRICS_SERVER_READINESS_OPTIONS_H_
#define METRICS_SERVER_READINESS_OPTIONS_H_

#include "absl/time/time.h"

namespace metrics::server {

struct ReadinessOptions {
  absl::Duration interval = absl::Seconds(1);
  // Not ready once the last good answer is older than this.
  absl::Duration stale_after = absl::Seconds(5);
};

}  // namespace metrics::server

#endif  // METRICS_SERVER_READINESS_OPTIONS_H_
