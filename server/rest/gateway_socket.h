// A private Unix-domain socket path for the REST gateway's gRPC channel to
// this same server: a fresh directory only this process's user may enter
// (mode 0700) under $TMPDIR or /tmp, removed with the object.
//
// Why not the in-process channel: with Debian's gRPC 1.51, every call that
// ends with a non-OK status over the in-process transport leaks about 5 KB
// (measured: 1 500 REST requests answered 404 grew metricsd by 9 MB; over a
// Unix socket, by nothing), so a stranger's bad requests would grow the
// server without bound.
//
// Thread-safety: thread-compatible; the path is immutable after Create.
#ifndef METRICS_SERVER_REST_GATEWAY_SOCKET_H_
#define METRICS_SERVER_REST_GATEWAY_SOCKET_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"

namespace metrics::server {

class GatewaySocket {
 public:
  // Makes the directory. UNAVAILABLE naming it when it cannot.
  static absl::StatusOr<std::unique_ptr<GatewaySocket>> Create();
  // Removes the socket file and the directory.
  ~GatewaySocket();

  GatewaySocket(const GatewaySocket&) = delete;
  GatewaySocket& operator=(const GatewaySocket&) = delete;

  // The gRPC address to listen on and connect to: "unix:/tmp/.../gateway".
  std::string target() const { return "unix:" + path_; }

 private:
  GatewaySocket(std::string directory, std::string path)
      : directory_(std::move(directory)), path_(std::move(path)) {}

  const std::string directory_;
  const std::string path_;
};

}  // namespace metrics::server

#endif  // METRICS_SERVER_REST_GATEWAY_SOCKET_H_
