#include "server/http/http_server.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <openssl/ssl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "server/http/http_engine.h"

namespace metrics::server {

namespace {

struct Listening {
  int fd;
  int port;
  bool ipv6;
};

// Binds and listens on host:port.
absl::StatusOr<Listening> Listen(const std::string& host, int port,
                                 absl::string_view address) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* found = nullptr;
  const std::string port_text = std::to_string(port);
  if (int rc = ::getaddrinfo(host.empty() ? nullptr : host.c_str(),
                             port_text.c_str(), &hints, &found);
      rc != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "HTTP address ", address, ": cannot resolve: ", gai_strerror(rc)));
  }
  std::string last_error = "no address";
  for (addrinfo* a = found; a != nullptr; a = a->ai_next) {
    const int fd =
        ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) continue;
    const int one = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (::bind(fd, a->ai_addr, a->ai_addrlen) == 0 &&
        ::listen(fd, SOMAXCONN) == 0) {
      sockaddr_storage bound{};
      socklen_t length = sizeof(bound);
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&bound), &length);
      const int bound_port =
          bound.ss_family == AF_INET6
              ? ntohs(reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port)
              : ntohs(reinterpret_cast<sockaddr_in*>(&bound)->sin_port);
      ::freeaddrinfo(found);
      return Listening{fd, bound_port, bound.ss_family == AF_INET6};
    }
    last_error = std::strerror(errno);
    ::close(fd);
  }
  ::freeaddrinfo(found);
  return absl::UnavailableError(
      absl::StrCat("HTTP address ", address, ": cannot listen: ", last_error));
}

// A TLS 1.2+ server context with the certificate chain and key (PEM), and
// with `client_ca_pem` set, one that ends the handshake of a client without
// a certificate signed by those CAs; errors name the flags.
absl::StatusOr<std::unique_ptr<boost::asio::ssl::context>> TlsContext(
    const std::string& cert_pem, const std::string& key_pem,
    const std::string& client_ca_pem) {
  namespace ssl = boost::asio::ssl;
  auto context = std::make_unique<ssl::context>(ssl::context::tls_server);
  context->set_options(ssl::context::default_workarounds |
                       ssl::context::no_sslv2 | ssl::context::no_sslv3 |
                       ssl::context::no_tlsv1 | ssl::context::no_tlsv1_1);
  boost::system::error_code ec;
  context->use_certificate_chain(
      boost::asio::buffer(cert_pem.data(), cert_pem.size()), ec);
  if (ec) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--tls-cert: not a usable PEM certificate chain (", ec.message(), ")"));
  }
  context->use_private_key(
      boost::asio::buffer(key_pem.data(), key_pem.size()), ssl::context::pem,
      ec);
  if (ec) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--tls-key: not a usable PEM private key (", ec.message(), ")"));
  }
  if (SSL_CTX_check_private_key(context->native_handle()) != 1) {
    return absl::InvalidArgumentError(
        "--tls-key: does not match the certificate of --tls-cert");
  }
  if (!client_ca_pem.empty()) {
    context->add_certificate_authority(
        boost::asio::buffer(client_ca_pem.data(), client_ca_pem.size()), ec);
    if (ec) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--tls-client-ca: not a usable PEM certificate (", ec.message(),
          ")"));
    }
    context->set_verify_mode(ssl::verify_peer |
                             ssl::verify_fail_if_no_peer_cert);
  }
  return context;
}

}  // namespace

absl::string_view HttpRequest::Header(absl::string_view name) const {
  for (const auto& [key, value] : headers) {
    if (absl::EqualsIgnoreCase(key, name)) return value;
  }
  return {};
}

absl::StatusOr<std::pair<std::string, int>> ParseHostPort(
    absl::string_view flag_name, absl::string_view address) {
  auto invalid = [&](absl::string_view why) {
    return absl::InvalidArgumentError(absl::StrCat(
        flag_name, " \"", address, "\": ", why, " (expected host:port)"));
  };
  std::string host;
  absl::string_view port_text;
  if (!address.empty() && address.front() == '[') {
    const size_t close = address.find(']');
    if (close == absl::string_view::npos || close + 1 >= address.size() ||
        address[close + 1] != ':') {
      return invalid("malformed IPv6 address");
    }
    host = std::string(address.substr(1, close - 1));
    port_text = address.substr(close + 2);
  } else {
    const size_t colon = address.rfind(':');
    if (colon == absl::string_view::npos) return invalid("no port");
    host = std::string(address.substr(0, colon));
    port_text = address.substr(colon + 1);
  }
  int port = 0;
  if (!absl::SimpleAtoi(port_text, &port) || port < 0 || port > 65535) {
    return invalid("the port must be a number from 0 to 65535");
  }
  return std::make_pair(host, port);
}

bool IsLoopbackHost(absl::string_view host) {
  if (absl::EqualsIgnoreCase(host, "localhost")) return true;
  const std::string text(host);
  in_addr v4{};
  if (::inet_pton(AF_INET, text.c_str(), &v4) == 1) {
    return (ntohl(v4.s_addr) >> 24) == 127;
  }
  in6_addr v6{};
  return ::inet_pton(AF_INET6, text.c_str(), &v6) == 1 &&
         IN6_IS_ADDR_LOOPBACK(&v6);
}

absl::StatusOr<std::unique_ptr<HttpServer>> HttpServer::Start(
    HttpServerOptions options, Handler handler) {
  absl::StatusOr<std::pair<std::string, int>> host_port =
      ParseHostPort("--http-address", options.address);
  if (!host_port.ok()) return host_port.status();
  if (options.max_connections < 1 || options.handler_threads < 1 ||
      options.max_streams < 1 || options.io_threads < 1) {
    return absl::InvalidArgumentError(
        "HTTP: connections, handler threads, streams and I/O threads must "
        "each be at least 1");
  }
  std::unique_ptr<boost::asio::ssl::context> tls;
  if (!options.tls_cert_pem.empty() || !options.tls_key_pem.empty()) {
    absl::StatusOr<std::unique_ptr<boost::asio::ssl::context>> context =
        TlsContext(options.tls_cert_pem, options.tls_key_pem,
                   options.tls_client_ca_pem);
    if (!context.ok()) return context.status();
    tls = *std::move(context);
  }
  absl::StatusOr<Listening> listening =
      Listen(host_port->first, host_port->second, options.address);
  if (!listening.ok()) return listening.status();
  auto engine = std::make_unique<server_internal::HttpEngine>(
      std::move(options), std::move(handler), listening->fd, listening->ipv6,
      std::move(tls));
  return std::unique_ptr<HttpServer>(
      new HttpServer(std::move(engine), listening->port));
}

HttpServer::HttpServer(std::unique_ptr<server_internal::HttpEngine> engine,
                       int port)
    : engine_(std::move(engine)), port_(port) {}

HttpServer::~HttpServer() { Shutdown(); }

void HttpServer::Shutdown() { engine_->Shutdown(); }

}  // namespace metrics::server
