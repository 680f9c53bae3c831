// The machinery behind HttpServer (http_server.h): the I/O threads and the
// acceptor (Boost.Asio), the handler pool, the connection
// registry that enforces max_connections by closing the connection that has
// waited longest for a request, and one Session per connection (Beast's
// parser on a strand, with a deadline on every read and write).
//
// Thread-safety: the engine's public methods are thread-safe; a Session runs
// on its own strand, and its pool work is handed back to that strand.
#ifndef METRICS_SERVER_HTTP_HTTP_ENGINE_H_
#define METRICS_SERVER_HTTP_HTTP_ENGINE_H_

#include <atomic>
#include <boost/asio/io_context.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/string_body.hpp>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "common/blocking_executor.h"
#include "server/http/http_server.h"
#include "server/http/http_stream.h"
#include "server/http/http_target.h"

namespace metrics::server::server_internal {

class Session;

class HttpEngine {
 public:
  // Takes the listening socket `fd` (bound and listening) and starts the
  // I/O threads and the handler pool. Serves TLS when `tls` is not null.
  HttpEngine(HttpServerOptions options, HttpServer::Handler handler, int fd,
             bool ipv6, std::unique_ptr<boost::asio::ssl::context> tls);
  ~HttpEngine();

  // See HttpServer::Shutdown.
  void Shutdown() ABSL_LOCKS_EXCLUDED(mu_);

  const HttpServerOptions& options() const { return options_; }
  const HttpServer::Handler& handler() const { return handler_; }
  common::BlockingExecutor& handler_pool() { return handler_pool_; }
  // The TLS context, or null for plain HTTP.
  boost::asio::ssl::context* tls() const { return tls_.get(); }

  // Takes a stream slot; false at max_streams.
  bool AcquireStream();
  void ReleaseStream();

  // Called by a Session's destructor.
  void Unregister(uint64_t id) ABSL_LOCKS_EXCLUDED(mu_);

 private:
  void Accept();
  void OnAccept(boost::system::error_code ec,
                boost::asio::ip::tcp::socket socket) ABSL_LOCKS_EXCLUDED(mu_);

  const HttpServerOptions options_;
  const HttpServer::Handler handler_;
  const std::unique_ptr<boost::asio::ssl::context> tls_;
  // Declared before the I/O context so that sessions destroyed with its
  // pending work can still unregister.
  absl::Mutex mu_;
  absl::flat_hash_map<uint64_t, std::weak_ptr<Session>> sessions_
      ABSL_GUARDED_BY(mu_);
  uint64_t next_id_ ABSL_GUARDED_BY(mu_) = 0;
  bool stopped_ ABSL_GUARDED_BY(mu_) = false;
  std::atomic<int> streams_{0};

  boost::asio::io_context io_;
  // The acceptor and its retry timer are used only on this strand: accepts
  // complete on any I/O thread, and Shutdown closes the acceptor from yet
  // another (found by ThreadSanitizer).
  boost::asio::strand<boost::asio::io_context::executor_type> accept_strand_;
  boost::asio::ip::tcp::acceptor acceptor_;
  boost::asio::steady_timer accept_retry_;
  std::optional<
      boost::asio::executor_work_guard<boost::asio::io_context::executor_type>>
      work_;
  common::BlockingExecutor handler_pool_;
  std::vector<std::thread> io_threads_;
};

// One connection: reads requests one at a time, checks their framing, runs
// the handler on the pool and writes the answer. Owned by the asynchronous
// operations and pool jobs that hold it.
class Session : public std::enable_shared_from_this<Session> {
 public:
  Session(HttpEngine& engine, boost::asio::ip::tcp::socket socket, uint64_t id);
  ~Session();

  // Starts reading the first request. Call once, after registering.
  void Start();
  // Answers 503 (every connection is busy) and closes.
  void RejectBusy();
  // Closes the connection if it is still waiting for a request.
  void Evict();
  // Closes the connection whatever it does (shutdown).
  void Close();

  // Waiting for a request (idle, or receiving its headers), and since when
  // (nanoseconds of a monotonic clock).
  bool waiting() const { return waiting_; }
  int64_t waiting_since() const { return waiting_since_; }

 private:
  void ReadRequest(bool first);
  void ReadHeader();
  void OnHeader(boost::system::error_code ec);
  // The transport's checks of a request's framing and target; false when it
  // answered an error itself.
  bool CheckHeader();
  void ReadBody();
  void OnBody(boost::system::error_code ec);
  void Dispatch();
  void RunHandler(HttpRequest request, bool head);
  // For a streamed `response`: takes a stream slot (true), or makes it the
  // 503 of too many streams, or (HEAD) drops the stream.
  bool TakeStreamSlot(HttpResponse& response, bool head);
  // Waits for a deferred answer (HttpResponse::Deferred), then sends it.
  void Wait(std::shared_ptr<HttpResponse::Deferred> deferred,
            std::vector<std::pair<std::string, std::string>> headers,
            bool head);
  void OnReady();
  // The deferred answer's deadline passed first.
  void OnDeferredDeadline();
  // Sends `response` for the deferred answer awaited.
  void AnswerDeferred(HttpResponse response);
  // Writes `response` (only its head for HEAD); `stream_slot` says that a
  // stream slot was taken for it.
  void Respond(HttpResponse response, bool head, bool stream_slot);
  void Send(std::string bytes, bool close_after);
  // Writes `bytes` within the write timeout, then calls `done` on the strand.
  void Write(std::string bytes,
             std::function<void(boost::system::error_code)> done);
  void OnWritten(bool close_after, boost::system::error_code ec);
  // Asks the stream's producer for its next piece.
  void NextChunk();
  void WriteChunk(std::string chunk, StreamStep step);
  // While a stream waits for its producer, watches the socket for a client
  // that leaves, so that a quiet stream does not outlive its reader.
  void WatchClient();
  // Answers a transport error as JSON and closes when `close`.
  void SendError(const absl::Status& status, int http_status, bool close);
  // Ends an unfinished stream (its producer cancels what it waits for).
  void DropStream();
  // Closes after the client has had time to read the answer.
  void Linger();
  void Shut();
  void SetWaiting(bool waiting);

  HttpEngine& engine_;
  const uint64_t id_;
  HttpStream stream_;
  boost::beast::flat_buffer buffer_;
  std::optional<
      boost::beast::http::request_parser<boost::beast::http::string_body>>
      parser_;
  std::optional<RequestTarget> target_;  // of the request in progress
  std::string path_;                     // the same path, for decorate_error
  std::string out_;                      // the bytes being written
  bool keep_alive_ = true;
  bool http10_ = false;
  bool expect_continue_ = false;
  HttpResponse::Stream stream_body_;
  std::shared_ptr<HttpResponse::Deferred> deferred_;  // while it is awaited
  boost::asio::steady_timer deferred_deadline_;        // its deadline
  bool deferred_head_ = false;
  // The session itself while an answer or a stream's next piece is awaited:
  // no I/O operation holds it then (the watch may have stopped). Released
  // when it comes or the stream is dropped.
  std::shared_ptr<Session> held_;
  // The headers set beside it, for its answer.
  std::vector<std::pair<std::string, std::string>> deferred_headers_;
  bool close_after_stream_ = false;
  bool holds_stream_slot_ = false;
  bool watching_ = false;  // a wait for the socket's readability is pending
  // A pipelined request's bytes arrived during the stream: watching again
  // would wake at once, so the stream's writes find a departed client.
  bool watch_stopped_ = false;
  size_t lingered_ = 0;
  std::atomic<bool> waiting_{false};
  std::atomic<int64_t> waiting_since_{0};
};

}  // namespace metrics::server::server_internal

#endif  // METRICS_SERVER_HTTP_HTTP_ENGINE_H_
