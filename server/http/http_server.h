// A small HTTP/1.1 server for a public port: the transport under the REST
// gateway, /healthz, /metrics and the profiler page. It binds its own
// listening socket (so "host:0" picks a free port that port() reports),
// parses requests strictly (Boost.Beast's parser, plus RFC 9112's rules on
// Host, Transfer-Encoding and the target, http_target.h), and hands each
// complete request to one handler function.
//
// Connections cost no thread while they send, wait or idle: a few I/O
// threads serve them all, with a time limit on each phase (headers, body,
// idle, each write). Handlers, which may block on the database, run on a
// bounded pool; a streamed response costs no thread either: its producer
// hands each piece over when it has one, and is asked for the next only once
// the piece before is written, so a client that does not read holds at most
// one piece and is cut at the write timeout. Every answer the transport gives itself (framing errors, limits,
// timeouts, overload) is JSON in the REST error shape (http_error.h).
//
// Thread-safety: the handler is called concurrently from pool threads and
// must be thread-safe itself. Shutdown is for the owner's thread.
#ifndef METRICS_SERVER_HTTP_HTTP_SERVER_H_
#define METRICS_SERVER_HTTP_HTTP_SERVER_H_

#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace metrics::server {

namespace server_internal {
class HttpEngine;
}  // namespace server_internal

struct HttpRequest {
  std::string method;  // "GET", "POST", ...
  std::string path;    // without the query string, percent-decoded
  std::vector<std::pair<std::string, std::string>> query;  // decoded, in order
  std::vector<std::pair<std::string, std::string>> headers;
  std::string body;
  std::string client_address;  // the client's IP address
  // True once the client has closed its connection (a cheap non-blocking
  // probe), for a handler that blocks long on its answer (streams and
  // deferred answers need none: the server watches their connection).
  // Valid until the response ends.
  std::function<bool()> client_gone;

  // The first header of that name (case-insensitive), or "".
  absl::string_view Header(absl::string_view name) const;
};

// What a streamed body's producer says after each piece.
enum class StreamStep {
  kMore,   // more pieces follow
  kEnd,    // the body is complete
  // The body cannot be completed (its source failed after the status was
  // sent): the piece is sent, then the connection is closed without the
  // chunked encoding's last chunk, so the client sees a truncated body,
  // never a short one that looks whole.
  kAbort,
};

struct HttpResponse {
  // Takes the next piece of a streamed body and what follows it.
  using Deliver = std::function<void(std::string chunk, StreamStep step)>;
  // Produces a streamed body, sent with chunked encoding. Called on an I/O
  // thread once the head is written and again each time the piece before
  // is written; it must not block, and calls `deliver` once, from any
  // thread, when it has the next piece. Destroying it (the client left, a
  // write failed, the server stops) cancels what it waits for, must not
  // block, and guarantees `deliver` is not called afterwards.
  using Stream = std::function<void(Deliver deliver)>;

  // An answer not known when the handler returns (a stream whose status
  // waits for its first message), so that no thread waits for it: the
  // server calls `wait` on an I/O thread; it must not block, and calls
  // `ready` once, from any thread, when the answer is known; then the server
  // calls `answer` (on an I/O thread) for it, which may be streamed. Headers
  // set beside `deferred` are added to the answer's, those of names it lacks.
  // Destroying them (the client left, the server stops) cancels the wait
  // and guarantees `ready` is not called afterwards.
  struct Deferred {
    std::function<void(std::function<void()> ready)> wait;
    std::function<HttpResponse()> answer;
    // Past this without `ready`, the wait is cancelled and the answer is
    // 504 DEADLINE_EXCEEDED: a call past its deadline, whose work may still
    // be running.
    absl::Time deadline = absl::InfiniteFuture();
  };

  int status = 200;
  std::string content_type = "application/json";
  std::vector<std::pair<std::string, std::string>> headers;
  std::string body;
  Stream stream;  // when set, the body instead of `body`
  // When set, the whole answer comes later, instead of all of the above.
  std::shared_ptr<Deferred> deferred;
};

struct HttpServerOptions {
  // "host:port" or "[v6]:port"; port 0 picks a free one.
  std::string address = "127.0.0.1:8080";
  // HTTPS: the certificate chain and its private key, in PEM. Both empty
  // serve plain HTTP.
  std::string tls_cert_pem;
  std::string tls_key_pem;
  // Mutual TLS: with this set (PEM CAs), a client without a certificate
  // signed by one of them fails the handshake, as on the gRPC port.
  std::string tls_client_ca_pem;
  // Connections open at once. At the limit, a new connection closes the one
  // that has waited longest for a request (idle, or still sending its
  // headers), so slow or idle clients cannot lock others out; when every
  // connection is busy with a request, the new one is answered 503. Each
  // open stream (follow) is a connection, so this is above max_streams.
  int max_connections = 8192;
  // Threads for handlers; requests beyond them wait in a queue of
  // max_queued_requests, and past that are answered 503.
  int handler_threads = 16;
  size_t max_queued_requests = 256;
  // Streamed responses (follow) at once; more are answered 503. A stream
  // holds no thread: what bounds followers is memory and CPU
  // (docs/operating.md, "Followers").
  int max_streams = 4096;
  // Threads that run the connections' I/O.
  int io_threads = 2;
  // Time to receive a request's headers: from the connection's start, or
  // from the first byte of a later request on the connection.
  absl::Duration header_timeout = absl::Seconds(10);
  // Time to receive a request's body once its headers are in.
  absl::Duration body_timeout = absl::Seconds(30);
  // A connection waiting this long for its next request is closed.
  absl::Duration idle_timeout = absl::Seconds(60);
  // Time the client may take to accept one write of a response (one chunk
  // of a stream).
  absl::Duration write_timeout = absl::Seconds(30);
  // The request line and headers together (431 past it; 414 when the
  // target alone is over max_target_bytes).
  size_t max_header_bytes = 16 << 10;
  size_t max_target_bytes = 8 << 10;
  // Larger request bodies are refused with 413 before they are read.
  size_t max_body_bytes = 16 << 20;
  // Paths whose handler never blocks (health checks): run on the I/O thread,
  // so they answer while every handler thread is busy.
  std::vector<std::string> inline_paths;
  // Adds headers to the answers the transport makes itself, by request path
  // ("" when no path could be read): the legacy routes' deprecation headers.
  std::function<void(absl::string_view path, HttpResponse&)> decorate_error;
};

class HttpServer {
 public:
  using Handler = std::function<HttpResponse(const HttpRequest&)>;

  // Binds and starts serving. INVALID_ARGUMENT for a malformed address or
  // option, UNAVAILABLE when it cannot be bound (the message names it).
  static absl::StatusOr<std::unique_ptr<HttpServer>> Start(
      HttpServerOptions options, Handler handler);
  // Stops if still running.
  ~HttpServer();

  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // The port actually bound.
  int port() const { return port_; }

  // Stops accepting, closes connections, lets running handlers return and
  // joins every thread. Idempotent.
  void Shutdown();

 private:
  HttpServer(std::unique_ptr<server_internal::HttpEngine> engine, int port);

  std::unique_ptr<server_internal::HttpEngine> engine_;
  int port_ = 0;
};

// Splits "host:port" / "[v6]:port". INVALID_ARGUMENT naming `flag_name` and
// the value when malformed.
absl::StatusOr<std::pair<std::string, int>> ParseHostPort(
    absl::string_view flag_name, absl::string_view address);

// Whether `host` (from ParseHostPort) names this machine only: "localhost",
// 127.0.0.0/8 or ::1. An empty host means every interface: false.
bool IsLoopbackHost(absl::string_view host);

}  // namespace metrics::server

#endif  // METRICS_SERVER_HTTP_HTTP_SERVER_H_
