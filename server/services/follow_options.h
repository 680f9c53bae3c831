// FollowReactor's options (follow_reactor.h), apart so that what sets them
// (server_options.h) does not parse gRPC's reactor and the query protos.
//
// Thread-safety: a plain value.
#ifndef METRICS_SERVER_SERVICES_FOLLOW_OPTIONS_H_
#define METRICS_SERVER_SERVICES_FOLLOW_OPTIONS_H_

#include "absl/time/time.h"

namespace metrics::server {

struct FollowOptions {
  absl::Duration slow_reader_limit = absl::Seconds(30);
};

}  // namespace metrics::server

#endif  // METRICS_SERVER_SERVICES_FOLLOW_OPTIONS_H_
