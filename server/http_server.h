// A small HTTP/1.1 server over libmicrohttpd: the transport under the REST
// gateway and /healthz. It binds its own listening socket (so "host:0"
// picks a free port that port() reports), reads each request's body up to
// a limit, and hands the complete request to one handler function.
//
// Each connection runs on its own thread (libmicrohttpd's
// thread-per-connection mode), bounded by max_connections, so a handler may
// block on the database without stalling other requests.
//
// Thread-safety: the handler is called concurrently from connection threads
// and must be thread-safe itself. Shutdown is for the owner's thread.
#ifndef METRICS_SERVER_HTTP_SERVER_H_
#define METRICS_SERVER_HTTP_SERVER_H_

#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

struct MHD_Daemon;

namespace metrics::server {

struct HttpRequest {
  std::string method;  // "GET", "POST", ...
  std::string path;    // without the query string, percent-decoded
  std::vector<std::pair<std::string, std::string>> query;  // decoded, in order
  std::vector<std::pair<std::string, std::string>> headers;
  std::string body;
  std::string client_address;  // the client's IP address
  // True once the client has closed its connection (a cheap non-blocking
  // probe), for streams that wait long between messages. Valid until the
  // response ends.
  std::function<bool()> client_gone;

  // The first header of that name (case-insensitive), or "".
  absl::string_view Header(absl::string_view name) const;
};

struct HttpResponse {
  // Produces a streamed body: appends the next piece to `chunk` (blocking
  // as long as it needs) and returns true, or returns false at the end
  // (after appending the last piece, if any). Sent with chunked encoding.
  using Stream = std::function<bool(std::string& chunk)>;

  int status = 200;
  std::string content_type = "application/json";
  std::vector<std::pair<std::string, std::string>> headers;
  std::string body;
  Stream stream;  // when set, the body instead of `body`
};

struct HttpServerOptions {
  // "host:port" or "[v6]:port"; port 0 picks a free one.
  std::string address = "127.0.0.1:8080";
  // Connections served at once; more wait in the kernel's accept queue.
  int max_connections = 256;
  // A connection idle this long is closed.
  absl::Duration idle_timeout = absl::Seconds(60);
  // Larger request bodies are refused with 413 before they are read whole.
  size_t max_body_bytes = 16 << 20;
};

class HttpServer {
 public:
  using Handler = std::function<HttpResponse(const HttpRequest&)>;

  // Binds and starts serving. INVALID_ARGUMENT for a malformed address,
  // UNAVAILABLE when it cannot be bound (the message names it).
  static absl::StatusOr<std::unique_ptr<HttpServer>> Start(
      HttpServerOptions options, Handler handler);
  // Stops if still running.
  ~HttpServer();

  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // The port actually bound.
  int port() const { return port_; }

  // Stops accepting, closes connections and joins their threads. Idempotent.
  void Shutdown();

  // Internal: the libmicrohttpd callbacks' entry to the handler.
  const Handler& handler() const { return handler_; }
  const HttpServerOptions& options() const { return options_; }

 private:
  HttpServer(HttpServerOptions options, Handler handler)
      : options_(std::move(options)), handler_(std::move(handler)) {}

  HttpServerOptions options_;
  Handler handler_;
  MHD_Daemon* daemon_ = nullptr;
  int port_ = 0;
};

// Splits "host:port" / "[v6]:port". INVALID_ARGUMENT naming `flag_name` and
// the value when malformed.
absl::StatusOr<std::pair<std::string, int>> ParseHostPort(
    absl::string_view flag_name, absl::string_view address);

}  // namespace metrics::server

#endif  // METRICS_SERVER_HTTP_SERVER_H_
