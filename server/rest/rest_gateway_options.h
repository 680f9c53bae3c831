// RestGateway's options (rest_gateway.h), apart so that what sets them
// (server_options.h) does not parse gRPC's generic stub.
//
// Thread-safety: a plain value.
#ifndef METRICS_SERVER_REST_REST_GATEWAY_OPTIONS_H_
#define METRICS_SERVER_REST_REST_GATEWAY_OPTIONS_H_

#include <string>
#include <utility>
#include <vector>

#include "absl/time/time.h"

namespace metrics::server {

class CallGuard;

struct RestGatewayOptions {
  // The deadline of a unary call; streams run until they end or the
  // client leaves.
  absl::Duration request_timeout = absl::Seconds(30);
  // Cross-origin requests allowed from this origin ("*" for any); empty
  // allows none (the Web UI served by metricsd itself needs none).
  std::string cors_origin;
  // Headers for every answer on a route of a method marked deprecated in
  // its .proto, errors made before the call included, unless the service
  // sent them itself (the legacy shims' Deprecation and Link).
  std::vector<std::pair<std::string, std::string>> deprecation_headers;
  // With authentication on: a request whose credential is refused (no
  // usable token, or a limited address) is answered here, before its body
  // is read into a request and without a call, so refusing costs a
  // fraction of serving. Null: every request is called.
  const CallGuard* guard = nullptr;
};

}  // namespace metrics::server

#endif  // METRICS_SERVER_REST_REST_GATEWAY_OPTIONS_H_
