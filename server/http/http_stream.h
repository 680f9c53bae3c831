// One HTTP connection's byte stream: plain TCP, or TLS over it when the
// server has a certificate. Either way a Beast tcp_stream is underneath, so
// the session's deadlines (expires_after) cover the TLS handshake and
// records too. Models Asio's AsyncReadStream and AsyncWriteStream for the
// session's handlers (not for every completion token).
//
// Thread-safety: like the streams it wraps: use it on its strand only.
#ifndef METRICS_SERVER_HTTP_HTTP_STREAM_H_
#define METRICS_SERVER_HTTP_HTTP_STREAM_H_

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/ssl/ssl_stream.hpp>
#include <optional>
#include <utility>

namespace metrics::server::server_internal {

class HttpStream {
 public:
  using executor_type = boost::beast::tcp_stream::executor_type;

  // TLS when `tls` is not null; it must outlive the stream.
  HttpStream(boost::asio::ip::tcp::socket socket,
             boost::asio::ssl::context* tls) {
    if (tls != nullptr) {
      tls_.emplace(std::move(socket), *tls);
    } else {
      plain_.emplace(std::move(socket));
    }
  }

  executor_type get_executor() { return tcp().get_executor(); }
  bool is_tls() const { return tls_.has_value(); }
  // The TCP layer: deadlines, the socket, closing.
  boost::beast::tcp_stream& tcp() {
    return tls_ ? tls_->next_layer() : *plain_;
  }

  // The server's side of the TLS handshake; a plain stream completes at
  // once.
  template <class Handler>
  void async_handshake(Handler&& handler) {
    if (tls_) {
      tls_->async_handshake(boost::asio::ssl::stream_base::server,
                            std::forward<Handler>(handler));
    } else {
      boost::asio::post(get_executor(),
                        [h = std::forward<Handler>(handler)]() mutable {
                          h(boost::system::error_code());
                        });
    }
  }

  template <class Buffers, class Handler>
  void async_read_some(const Buffers& buffers, Handler&& handler) {
    if (tls_) {
      tls_->async_read_some(buffers, std::forward<Handler>(handler));
    } else {
      plain_->async_read_some(buffers, std::forward<Handler>(handler));
    }
  }

  template <class Buffers, class Handler>
  void async_write_some(const Buffers& buffers, Handler&& handler) {
    if (tls_) {
      tls_->async_write_some(buffers, std::forward<Handler>(handler));
    } else {
      plain_->async_write_some(buffers, std::forward<Handler>(handler));
    }
  }

 private:
  std::optional<boost::beast::tcp_stream> plain_;
  std::optional<boost::beast::ssl_stream<boost::beast::tcp_stream>> tls_;
};

}  // namespace metrics::server::server_internal

#endif  // METRICS_SERVER_HTTP_HTTP_STREAM_H_
