#include "server/http_server.h"

#include <microhttpd.h>
#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "server/http_error.h"

namespace metrics::server {

namespace {

// One request's state across libmicrohttpd's calls of the access handler.
struct RequestState {
  HttpRequest request;
  bool too_large = false;
};

using Pairs = std::vector<std::pair<std::string, std::string>>;

MHD_Result CollectPair(void* cls, MHD_ValueKind, const char* key,
                       const char* value) {
  static_cast<Pairs*>(cls)->emplace_back(key, value != nullptr ? value : "");
  return MHD_YES;
}

// A streamed body's state between libmicrohttpd's calls for more.
struct StreamState {
  HttpResponse::Stream stream;
  std::string pending;
  size_t offset = 0;
  bool ended = false;
};

// Called on the connection's thread for more of a streamed body. Never
// returns 0 (which would make the thread-per-connection mode spin): it
// blocks in the stream until it has bytes or the stream ends.
ssize_t ReadStream(void* cls, uint64_t, char* buffer, size_t max) {
  auto* state = static_cast<StreamState*>(cls);
  while (state->offset == state->pending.size()) {
    if (state->ended) return MHD_CONTENT_READER_END_OF_STREAM;
    state->pending.clear();
    state->offset = 0;
    state->ended = !state->stream(state->pending);
  }
  const size_t n = std::min(max, state->pending.size() - state->offset);
  std::memcpy(buffer, state->pending.data() + state->offset, n);
  state->offset += n;
  return static_cast<ssize_t>(n);
}

void FreeStream(void* cls) { delete static_cast<StreamState*>(cls); }

MHD_Result Queue(MHD_Connection* connection, const HttpResponse& response) {
  MHD_Response* r = nullptr;
  if (response.stream) {
    r = MHD_create_response_from_callback(
        MHD_SIZE_UNKNOWN, 16 * 1024, &ReadStream,
        new StreamState{response.stream, {}, 0, false}, &FreeStream);
  } else {
    r = MHD_create_response_from_buffer(
        response.body.size(), const_cast<char*>(response.body.data()),
        MHD_RESPMEM_MUST_COPY);
  }
  if (r == nullptr) return MHD_NO;
  MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE,
                          response.content_type.c_str());
  for (const auto& [name, value] : response.headers) {
    MHD_add_response_header(r, name.c_str(), value.c_str());
  }
  const MHD_Result queued = MHD_queue_response(
      connection, static_cast<unsigned int>(response.status), r);
  MHD_destroy_response(r);
  return queued;
}

std::string ClientAddress(MHD_Connection* connection) {
  const MHD_ConnectionInfo* info =
      MHD_get_connection_info(connection, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
  if (info == nullptr || info->client_addr == nullptr) return "unknown";
  char host[NI_MAXHOST];
  const socklen_t length = info->client_addr->sa_family == AF_INET6
                               ? sizeof(sockaddr_in6)
                               : sizeof(sockaddr_in);
  if (::getnameinfo(info->client_addr, length, host, sizeof(host), nullptr, 0,
                    NI_NUMERICHOST) != 0) {
    return "unknown";
  }
  return host;
}

// libmicrohttpd calls this once with the headers, then once per body chunk,
// then once more with no data: the moment to answer.
MHD_Result Access(void* cls, MHD_Connection* connection, const char* url,
                  const char* method, const char*, const char* upload_data,
                  size_t* upload_data_size, void** con_cls) {
  auto* server = static_cast<HttpServer*>(cls);
  auto* state = static_cast<RequestState*>(*con_cls);
  if (state == nullptr) {
    state = new RequestState;
    state->request.method = method;
    state->request.path = url;
    MHD_get_connection_values(connection, MHD_GET_ARGUMENT_KIND, CollectPair,
                              &state->request.query);
    MHD_get_connection_values(connection, MHD_HEADER_KIND, CollectPair,
                              &state->request.headers);
    state->request.client_address = ClientAddress(connection);
    state->request.client_gone = [connection] {
      const MHD_ConnectionInfo* info = MHD_get_connection_info(
          connection, MHD_CONNECTION_INFO_CONNECTION_FD);
      if (info == nullptr) return true;
      char byte;
      const ssize_t n = ::recv(info->connect_fd, &byte, 1,
                               MSG_PEEK | MSG_DONTWAIT);
      return n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK);
    };
    *con_cls = state;
    return MHD_YES;
  }
  if (*upload_data_size != 0) {
    const size_t limit = server->options().max_body_bytes;
    if (state->request.body.size() + *upload_data_size > limit) {
      state->too_large = true;  // keep reading, but do not keep the bytes
    } else if (!state->too_large) {
      state->request.body.append(upload_data, *upload_data_size);
    }
    *upload_data_size = 0;
    return MHD_YES;
  }
  if (state->too_large) {
    return Queue(connection,
                 ErrorResponse(absl::InvalidArgumentError(absl::StrCat(
                                   "request body: larger than the limit of ",
                                   server->options().max_body_bytes, " bytes")),
                               413));
  }
  return Queue(connection, server->handler()(state->request));
}

void Completed(void*, MHD_Connection*, void** con_cls,
               MHD_RequestTerminationCode) {
  delete static_cast<RequestState*>(*con_cls);
  *con_cls = nullptr;
}

// Binds and listens on host:port; returns the socket and the bound port.
absl::StatusOr<std::pair<int, int>> Listen(const std::string& host, int port,
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
    if (::bind(fd, a->ai_addr, a->ai_addrlen) == 0 && ::listen(fd, 128) == 0) {
      sockaddr_storage bound{};
      socklen_t length = sizeof(bound);
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&bound), &length);
      const int bound_port =
          bound.ss_family == AF_INET6
              ? ntohs(reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port)
              : ntohs(reinterpret_cast<sockaddr_in*>(&bound)->sin_port);
      ::freeaddrinfo(found);
      return std::make_pair(fd, bound_port);
    }
    last_error = std::strerror(errno);
    ::close(fd);
  }
  ::freeaddrinfo(found);
  return absl::UnavailableError(
      absl::StrCat("HTTP address ", address, ": cannot listen: ", last_error));
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

absl::StatusOr<std::unique_ptr<HttpServer>> HttpServer::Start(
    HttpServerOptions options, Handler handler) {
  absl::StatusOr<std::pair<std::string, int>> host_port =
      ParseHostPort("--http-address", options.address);
  if (!host_port.ok()) return host_port.status();
  absl::StatusOr<std::pair<int, int>> listening =
      Listen(host_port->first, host_port->second, options.address);
  if (!listening.ok()) return listening.status();

  std::unique_ptr<HttpServer> server(
      new HttpServer(std::move(options), std::move(handler)));
  server->port_ = listening->second;
  server->daemon_ = MHD_start_daemon(
      MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD |
          MHD_USE_ITC,
      0, nullptr, nullptr, &Access, server.get(),
      MHD_OPTION_LISTEN_SOCKET, listening->first,
      MHD_OPTION_CONNECTION_LIMIT,
      static_cast<unsigned int>(server->options_.max_connections),
      MHD_OPTION_CONNECTION_TIMEOUT,
      static_cast<unsigned int>(
          absl::ToInt64Seconds(server->options_.idle_timeout)),
      MHD_OPTION_NOTIFY_COMPLETED, &Completed, nullptr, MHD_OPTION_END);
  if (server->daemon_ == nullptr) {
    ::close(listening->first);
    return absl::InternalError(absl::StrCat(
        "HTTP address ", server->options_.address,
        ": libmicrohttpd failed to start"));
  }
  return server;
}

HttpServer::~HttpServer() { Shutdown(); }

void HttpServer::Shutdown() {
  if (daemon_ == nullptr) return;
  MHD_stop_daemon(daemon_);  // closes the listening socket too
  daemon_ = nullptr;
}

}  // namespace metrics::server
