// Configuration of metricsd, filled from flags and the environment by
// main.cc and passed to MetricsServer::Create. Defaults are what a
// developer running the service on their own machine wants.
//
// Thread-safety: a plain value.
#ifndef METRICS_SERVER_SERVER_OPTIONS_H_
#define METRICS_SERVER_SERVER_OPTIONS_H_

#include <string>

#include "server/http_server.h"

namespace metrics::server {

struct ServerOptions {
  // libpq connection string; empty means the PG* environment variables.
  std::string database_url;
  // host:port for gRPC; port 0 picks a free port (see grpc_port()).
  std::string grpc_address = "127.0.0.1:8081";
  // The HTTP side: REST gateway and /healthz. Its address defaults to
  // 127.0.0.1:8080.
  HttpServerOptions http;
  // Apply pending migrations at start instead of refusing to start.
  bool migrate = false;
};

}  // namespace metrics::server

#endif  // METRICS_SERVER_SERVER_OPTIONS_H_
