// One HTTP connection of HttpEngine (http_engine.h): the request's phases,
// the transport's own checks of framing (RFC 9112) and the writing of
// answers, plain or chunked.
#include <sys/socket.h>

#include <boost/asio/dispatch.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/error.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/status.hpp>
#include <algorithm>
#include <cerrno>
#include <chrono>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "server/http/http_engine.h"
#include "server/http/http_error.h"
#include "server/http/http_target.h"

namespace metrics::server::server_internal {

namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = boost::beast::http;
using tcp = asio::ip::tcp;

// After an answer that closes the connection, what the client still sends
// is read and dropped for a moment, so that closing with unread bytes does
// not reset the connection before the client has read the answer.
constexpr size_t kMaxLingerBytes = 1 << 20;
constexpr auto kLingerTime = std::chrono::seconds(2);

std::chrono::nanoseconds Chrono(absl::Duration d) {
  return absl::ToChronoNanoseconds(d);
}

int64_t MonotonicNanos() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

std::string Text(beast::string_view view) {
  return std::string(view.data(), view.size());
}

std::string Reason(int status) {
  const beast::string_view reason =
      http::obsolete_reason(http::int_to_status(static_cast<unsigned>(status)));
  return reason == "<unknown-status>" ? "Status" : Text(reason);
}

// A header value from a handler: CR, LF or NUL would split the header block.
std::string HeaderText(absl::string_view text) {
  std::string out(text);
  for (char& c : out) {
    if (c == '\r' || c == '\n' || c == '\0') c = ' ';
  }
  return out;
}

absl::Status BodyTooLarge(size_t limit) {
  return absl::InvalidArgumentError(
      absl::StrCat("request body: larger than the limit of ", limit, " bytes"));
}

// What a connection's socket holds while an answer is in progress: a
// non-blocking probe of its descriptor, which consumes nothing.
enum class Peeked { kNothing, kBytes, kClosed };

Peeked Peek(int fd) {
  char byte;
  const ssize_t n = ::recv(fd, &byte, 1, MSG_PEEK | MSG_DONTWAIT);
  if (n > 0) return Peeked::kBytes;
  if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return Peeked::kNothing;
  return Peeked::kClosed;
}

// Whether the client has left. Over TLS a client that leaves first sends
// close_notify, so bytes waiting mean it left too: a browser or HTTP client
// never sends more while an answer is in progress (a pipelining one would
// lose that call).
bool ClientLeft(Peeked peeked, bool tls) {
  return peeked == Peeked::kClosed || (tls && peeked == Peeked::kBytes);
}

bool IsHttpError(const boost::system::error_code& ec) {
  return ec.category() ==
         http::make_error_code(http::error::end_of_stream).category();
}

}  // namespace

Session::Session(HttpEngine& engine, tcp::socket socket, uint64_t id)
    : engine_(engine),
      id_(id),
      stream_(std::move(socket), engine.tls()),
      buffer_(engine.options().max_header_bytes + (64 << 10)),
      deferred_deadline_(stream_.get_executor()) {}

Session::~Session() {
  if (holds_stream_slot_) engine_.ReleaseStream();
  engine_.Unregister(id_);
}

void Session::Start() {
  SetWaiting(true);
  asio::dispatch(stream_.get_executor(), [self = shared_from_this()] {
    // The handshake is part of the first request's headers: the same
    // deadline bounds a client that starts one and stalls.
    self->stream_.tcp().expires_after(
        Chrono(self->engine_.options().header_timeout));
    self->stream_.async_handshake(
        [self](boost::system::error_code ec) {
          if (ec) {
            self->Shut();  // not TLS, or a failed handshake: nothing to say
            return;
          }
          self->ReadRequest(true);
        });
  });
}

void Session::RejectBusy() {
  asio::dispatch(stream_.get_executor(), [self = shared_from_this()] {
    self->SendError(absl::UnavailableError(
                        "too many connections, all of them busy; try again"),
                    503, /*close=*/true);
  });
}

void Session::Evict() {
  asio::post(stream_.get_executor(), [self = shared_from_this()] {
    if (self->waiting_) self->Shut();
  });
}

void Session::Close() {
  asio::post(stream_.get_executor(),
             [self = shared_from_this()] { self->Shut(); });
}

void Session::Shut() {
  DropStream();
  boost::system::error_code ignored;
  stream_.tcp().socket().shutdown(tcp::socket::shutdown_both, ignored);
  stream_.tcp().close();
}

void Session::SetWaiting(bool waiting) {
  if (waiting) waiting_since_ = MonotonicNanos();
  waiting_ = waiting;
}

void Session::ReadRequest(bool first) {
  const HttpServerOptions& options = engine_.options();
  parser_.emplace();
  parser_->header_limit(static_cast<std::uint32_t>(options.max_header_bytes));
  parser_->body_limit(options.max_body_bytes);
  path_.clear();
  target_.reset();
  expect_continue_ = false;
  SetWaiting(true);
  if (first || buffer_.size() > 0) {
    ReadHeader();
    return;
  }
  // Between requests the idle timeout applies; the header timeout starts
  // with the next request's first byte.
  stream_.tcp().expires_after(Chrono(options.idle_timeout));
  stream_.async_read_some(
      buffer_.prepare(4096),
      [self = shared_from_this()](boost::system::error_code ec, size_t n) {
        if (ec) {
          self->Shut();
          return;
        }
        self->buffer_.commit(n);
        self->ReadHeader();
      });
}

void Session::ReadHeader() {
  stream_.tcp().expires_after(Chrono(engine_.options().header_timeout));
  http::async_read_header(
      stream_, buffer_, *parser_,
      [self = shared_from_this()](boost::system::error_code ec, size_t) {
        self->OnHeader(ec);
      });
}

void Session::OnHeader(boost::system::error_code ec) {
  SetWaiting(false);
  if (ec == http::error::header_limit || ec == http::error::buffer_overflow) {
    // The request line is parsed before the headers: no target yet means
    // the line alone was too long.
    const bool long_target = parser_->get().target().empty();
    SendError(absl::InvalidArgumentError(absl::StrCat(
                  long_target ? "request target" : "request headers",
                  ": longer than the limit of ",
                  long_target ? engine_.options().max_target_bytes
                              : engine_.options().max_header_bytes,
                  " bytes")),
              long_target ? 414 : 431, /*close=*/true);
    return;
  }
  if (ec == http::error::body_limit) {  // by its Content-Length
    SendError(BodyTooLarge(engine_.options().max_body_bytes), 413,
              /*close=*/true);
    return;
  }
  if (ec == http::error::end_of_stream || !IsHttpError(ec)) {
    // The client left, the header timeout closed the socket, or the
    // connection broke: nothing to answer.
    if (ec) {
      Shut();
      return;
    }
  } else {
    SendError(absl::InvalidArgumentError(
                  absl::StrCat("HTTP framing: ", ec.message())),
              400, /*close=*/true);
    return;
  }
  if (CheckHeader()) ReadBody();
}

bool Session::CheckHeader() {
  const HttpServerOptions& options = engine_.options();
  const auto& request = parser_->get();
  http10_ = request.version() == 10;
  keep_alive_ = request.keep_alive();
  auto refuse = [this](absl::string_view message, int status) {
    SendError(absl::InvalidArgumentError(message), status, /*close=*/true);
    return false;
  };
  if (request.version() != 10 && request.version() != 11) {
    return refuse("HTTP version: only HTTP/1.0 and HTTP/1.1 are served", 505);
  }
  const beast::string_view target = request.target();
  absl::StatusOr<RequestTarget> parsed =
      ParseRequestTarget(absl::string_view(target.data(), target.size()));
  // The path alone, for decorate_error, even when the query is bad.
  if (absl::StatusOr<RequestTarget> path_only =
          ParseRequestTarget(absl::string_view(target.data(), target.size())
                                 .substr(0, target.find('?')));
      path_only.ok()) {
    path_ = std::move(path_only->path);
  }
  if (target.size() > options.max_target_bytes) {
    return refuse(absl::StrCat("request target: longer than the limit of ",
                               options.max_target_bytes, " bytes"),
                  414);
  }
  if (!parsed.ok()) {
    // The framing is sound: the connection can go on unless a body that
    // will not be read follows.
    SendError(parsed.status(), 400, /*close=*/!parser_->is_done());
    return false;
  }
  target_ = *std::move(parsed);
  const auto hosts = request.equal_range(http::field::host);
  const auto host_count = std::distance(hosts.first, hosts.second);
  if (host_count > 1 || (!http10_ && host_count != 1)) {
    return refuse("Host: an HTTP/1.1 request needs exactly one Host header",
                  400);
  }
  const auto codings = request.equal_range(http::field::transfer_encoding);
  if (codings.first != codings.second) {
    if (http10_) {
      return refuse("Transfer-Encoding: not allowed in an HTTP/1.0 request",
                    400);
    }
    std::vector<std::string> names;
    for (auto it = codings.first; it != codings.second; ++it) {
      for (absl::string_view name : absl::StrSplit(
               absl::string_view(it->value().data(), it->value().size()), ',',
               absl::SkipWhitespace())) {
        names.push_back(
            absl::AsciiStrToLower(absl::StripAsciiWhitespace(name)));
      }
    }
    if (names.empty() || names.back() != "chunked") {
      return refuse(
          "Transfer-Encoding: the final coding must be chunked, or the "
          "body's length cannot be known",
          400);
    }
    if (names.size() > 1) {
      SendError(absl::UnimplementedError(
                    "Transfer-Encoding: only \"chunked\" is supported"),
                501, /*close=*/true);
      return false;
    }
  }
  if (const auto expect = request.find(http::field::expect);
      expect != request.end()) {
    if (!beast::iequals(expect->value(), "100-continue")) {
      return refuse("Expect: only 100-continue is supported", 417);
    }
    expect_continue_ = true;
  }
  return true;
}

void Session::ReadBody() {
  if (parser_->is_done()) {
    Dispatch();
    return;
  }
  auto read = [self = shared_from_this()] {
    self->stream_.tcp().expires_after(Chrono(self->engine_.options().body_timeout));
    http::async_read(
        self->stream_, self->buffer_, *self->parser_,
        [self](boost::system::error_code ec, size_t) { self->OnBody(ec); });
  };
  if (!expect_continue_) {
    read();
    return;
  }
  Write("HTTP/1.1 100 Continue\r\n\r\n",
        [self = shared_from_this(), read](boost::system::error_code ec) {
          if (ec) {
            self->Shut();
            return;
          }
          read();
        });
}

void Session::OnBody(boost::system::error_code ec) {
  if (ec == http::error::body_limit) {  // a chunked body past the limit
    SendError(BodyTooLarge(engine_.options().max_body_bytes), 413,
              /*close=*/true);
    return;
  }
  if (ec && IsHttpError(ec) && ec != http::error::end_of_stream) {
    SendError(absl::InvalidArgumentError(
                  absl::StrCat("HTTP framing: request body: ", ec.message())),
              400, /*close=*/true);
    return;
  }
  if (ec) {
    Shut();  // timed out (the socket is closed), left, or broke
    return;
  }
  Dispatch();
}

void Session::Dispatch() {
  auto& message = parser_->get();
  HttpRequest request;
  request.method = Text(message.method_string());
  request.path = std::move(target_->path);
  request.query = std::move(target_->query);
  for (const auto& field : message) {
    request.headers.emplace_back(Text(field.name_string()),
                                 Text(field.value()));
  }
  request.body = std::move(message.body());
  boost::system::error_code ec;
  const tcp::endpoint peer = stream_.tcp().socket().remote_endpoint(ec);
  request.client_address = ec ? "unknown" : peer.address().to_string();
  // Called from a pool thread: it probes the descriptor, not the socket
  // object the strand owns.
  request.client_gone = [fd = stream_.tcp().socket().native_handle(),
                         tls = stream_.is_tls()] { return ClientLeft(Peek(fd), tls); };
  const bool head = request.method == "HEAD";
  const std::vector<std::string>& inline_paths = engine_.options().inline_paths;
  if (std::find(inline_paths.begin(), inline_paths.end(), request.path) !=
      inline_paths.end()) {
    Respond(engine_.handler()(request), head, /*stream_slot=*/false);
    return;
  }
  if (!engine_.handler_pool().Post(
          [self = shared_from_this(), request = std::move(request),
           head]() mutable { self->RunHandler(std::move(request), head); })) {
    SendError(absl::UnavailableError(
                  "the server is busy (every handler thread and its queue "
                  "are taken); try again"),
              503, /*close=*/false);
  }
}

void Session::RunHandler(HttpRequest request, bool head) {
  HttpResponse response = engine_.handler()(request);
  if (response.deferred) {
    asio::post(stream_.get_executor(),
               [self = shared_from_this(), deferred = std::move(response.deferred),
                headers = std::move(response.headers), head]() mutable {
                 self->Wait(std::move(deferred), std::move(headers), head);
               });
    return;
  }
  const bool slot = TakeStreamSlot(response, head);
  asio::post(
      stream_.get_executor(),
      [self = shared_from_this(), response = std::move(response), head,
       slot]() mutable { self->Respond(std::move(response), head, slot); });
}

bool Session::TakeStreamSlot(HttpResponse& response, bool head) {
  if (!response.stream) return false;
  if (head) {
    response.stream = nullptr;
    response.headers.emplace_back("Transfer-Encoding", "chunked");
    return false;
  }
  if (engine_.AcquireStream()) return true;
  response = ErrorResponse(
      absl::UnavailableError(absl::StrCat("too many open streams (the limit is ",
                                          engine_.options().max_streams,
                                          "); try again")),
      503);
  response.headers.emplace_back("Retry-After", "1");
  return false;
}

void Session::Wait(
    std::shared_ptr<HttpResponse::Deferred> deferred,
    std::vector<std::pair<std::string, std::string>> headers, bool head) {
  deferred_ = std::move(deferred);
  deferred_headers_ = std::move(headers);
  held_ = shared_from_this();
  deferred_head_ = head;
  // Until the answer comes the connection is quiet: watched for a client
  // that leaves, whose going cancels the wait.
  stream_.tcp().expires_never();
  WatchClient();
  if (deferred_->deadline != absl::InfiniteFuture()) {
    deferred_deadline_.expires_after(
        Chrono(std::max(deferred_->deadline - absl::Now(), absl::ZeroDuration())));
    deferred_deadline_.async_wait(
        [weak = weak_from_this()](boost::system::error_code ec) {
          const std::shared_ptr<Session> self = weak.lock();
          if (self != nullptr && !ec) self->OnDeferredDeadline();
        });
  }
  deferred_->wait([weak = weak_from_this()] {
    const std::shared_ptr<Session> self = weak.lock();
    if (self == nullptr) return;
    asio::post(self->stream_.get_executor(), [self] { self->OnReady(); });
  });
}

void Session::OnReady() {
  if (deferred_ == nullptr) return;  // dropped: the client left, or late
  deferred_deadline_.cancel();
  AnswerDeferred(deferred_->answer());
}

void Session::OnDeferredDeadline() {
  if (deferred_ == nullptr) return;  // answered meanwhile
  AnswerDeferred(ErrorResponse(absl::DeadlineExceededError("Deadline Exceeded")));
}

void Session::AnswerDeferred(HttpResponse response) {
  deferred_ = nullptr;  // cancels the wait
  held_ = nullptr;  // the caller holds the session
  if (response.deferred) {
    response = ErrorResponse(absl::InternalError("an answer deferred twice"));
  }
  for (auto& [name, value] : deferred_headers_) {
    const bool present = std::any_of(
        response.headers.begin(), response.headers.end(),
        [&name = name](const auto& h) { return absl::EqualsIgnoreCase(h.first, name); });
    if (!present) response.headers.emplace_back(std::move(name), std::move(value));
  }
  deferred_headers_.clear();
  const bool slot = TakeStreamSlot(response, deferred_head_);
  Respond(std::move(response), deferred_head_, slot);
}

void Session::Respond(HttpResponse response, bool head, bool stream_slot) {
  if (stream_slot) holds_stream_slot_ = true;
  const bool streamed = response.stream != nullptr;
  // HTTP/1.0 has no chunked encoding: a stream's end is the connection's.
  const bool close_after = !keep_alive_ || (streamed && http10_);
  std::string out = absl::StrCat("HTTP/1.1 ", response.status, " ",
                                 Reason(response.status), "\r\n");
  absl::StrAppend(&out, "Date: ",
                  absl::FormatTime("%a, %d %b %Y %H:%M:%S GMT", absl::Now(),
                                   absl::UTCTimeZone()),
                  "\r\nContent-Type: ", HeaderText(response.content_type),
                  "\r\n");
  bool chunked_head = false;
  for (const auto& [name, value] : response.headers) {
    if (absl::EqualsIgnoreCase(name, "Transfer-Encoding")) {
      chunked_head = true;
      continue;
    }
    absl::StrAppend(&out, HeaderText(name), ": ", HeaderText(value), "\r\n");
  }
  if (close_after) {
    out += "Connection: close\r\n";
  } else if (http10_) {
    out += "Connection: keep-alive\r\n";
  }
  if (streamed) {
    if (!http10_) out += "Transfer-Encoding: chunked\r\n";
    out += "\r\n";
    stream_body_ = std::move(response.stream);
    close_after_stream_ = close_after;
    Write(std::move(out),
          [self = shared_from_this()](boost::system::error_code ec) {
            if (ec) {
              self->Shut();
              return;
            }
            self->NextChunk();
          });
    return;
  }
  if (chunked_head) {
    out += "Transfer-Encoding: chunked\r\n\r\n";
  } else {
    absl::StrAppend(&out, "Content-Length: ", response.body.size(), "\r\n\r\n");
    if (!head) out += response.body;
  }
  Send(std::move(out), close_after);
}

void Session::Send(std::string bytes, bool close_after) {
  Write(std::move(bytes),
        [self = shared_from_this(), close_after](boost::system::error_code ec) {
          self->OnWritten(close_after, ec);
        });
}

void Session::Write(std::string bytes,
                    std::function<void(boost::system::error_code)> done) {
  out_ = std::move(bytes);
  stream_.tcp().expires_after(Chrono(engine_.options().write_timeout));
  asio::async_write(stream_, asio::buffer(out_),
                    [done = std::move(done)](boost::system::error_code ec,
                                             size_t) { done(ec); });
}

void Session::OnWritten(bool close_after, boost::system::error_code ec) {
  if (ec) {
    Shut();
  } else if (close_after) {
    Linger();
  } else {
    ReadRequest(/*first=*/false);
  }
}

void Session::NextChunk() {
  // Dropped (the client left) while the piece before was being written.
  if (stream_body_ == nullptr) return;
  // A stream may stay quiet for long: no deadline while its producer has
  // nothing, but a watch for a client that leaves.
  stream_.tcp().expires_never();
  WatchClient();
  held_ = shared_from_this();
  stream_body_([weak = weak_from_this()](std::string chunk, StreamStep step) {
    const std::shared_ptr<Session> self = weak.lock();
    if (self == nullptr) return;
    asio::post(self->stream_.get_executor(),
               [self, chunk = std::move(chunk), step]() mutable {
                 self->WriteChunk(std::move(chunk), step);
               });
  });
}

void Session::WriteChunk(std::string chunk, StreamStep step) {
  if (stream_body_ == nullptr) return;  // dropped while the piece came
  const bool last = step != StreamStep::kMore;
  std::string out;
  if (!chunk.empty()) {
    out = http10_
              ? std::move(chunk)
              : absl::StrCat(absl::Hex(chunk.size()), "\r\n", chunk, "\r\n");
  }
  if (last) {
    // An aborted body ends without the last chunk (and, for HTTP/1.0,
    // whose body ends with the connection, the client cannot tell).
    if (!http10_ && step == StreamStep::kEnd) out += "0\r\n\r\n";
    DropStream();  // ended: its call is finished
  } else if (out.empty()) {
    NextChunk();
    return;
  }
  if (step == StreamStep::kAbort && out.empty()) {
    Shut();
    return;
  }
  Write(std::move(out),
        [self = shared_from_this(), step](boost::system::error_code ec) {
          if (ec || step == StreamStep::kAbort) {
            self->Shut();
          } else if (step == StreamStep::kEnd) {
            self->OnWritten(self->close_after_stream_, ec);
          } else {
            self->NextChunk();
          }
        });
}

void Session::WatchClient() {
  if (watching_ || watch_stopped_) return;
  watching_ = true;
  // Waiting for readability consumes nothing: bytes of a pipelined request
  // stay for the parser.
  stream_.tcp().socket().async_wait(
      tcp::socket::wait_read,
      [self = shared_from_this()](boost::system::error_code ec) {
        self->watching_ = false;
        // Closed, or the stream ended meanwhile: the request reader owns
        // the socket again.
        if (ec || (self->stream_body_ == nullptr && self->deferred_ == nullptr)) {
          return;
        }
        const Peeked peeked = Peek(self->stream_.tcp().socket().native_handle());
        if (ClientLeft(peeked, self->stream_.is_tls())) {
          self->Shut();
        } else if (peeked == Peeked::kBytes) {
          self->watch_stopped_ = true;
        } else {
          self->WatchClient();  // woken by bytes the request reader took
        }
      });
}

void Session::DropStream() {
  // The producer's destructor cancels what it waits for without blocking.
  stream_body_ = nullptr;
  deferred_ = nullptr;
  deferred_deadline_.cancel();
  held_ = nullptr;  // callers hold the session
  watch_stopped_ = false;
  if (holds_stream_slot_) {
    holds_stream_slot_ = false;
    engine_.ReleaseStream();
  }
}

void Session::SendError(const absl::Status& status, int http_status,
                        bool close) {
  HttpResponse response = ErrorResponse(status, http_status);
  if (http_status == 503) response.headers.emplace_back("Retry-After", "1");
  if (engine_.options().decorate_error) {
    engine_.options().decorate_error(path_, response);
  }
  if (close) keep_alive_ = false;
  Respond(std::move(response), /*head=*/false, /*stream_slot=*/false);
}

void Session::Linger() {
  boost::system::error_code ignored;
  stream_.tcp().socket().shutdown(tcp::socket::shutdown_send, ignored);
  stream_.tcp().expires_after(kLingerTime);
  buffer_.consume(buffer_.size());
  // Below TLS: what is left is dropped unread, records and all.
  stream_.tcp().async_read_some(
      buffer_.prepare(16 << 10),
      [self = shared_from_this()](boost::system::error_code ec, size_t n) {
        self->lingered_ += n;
        if (ec || self->lingered_ > kMaxLingerBytes) {
          self->Shut();
        } else {
          self->Linger();
        }
      });
}

}  // namespace metrics::server::server_internal
