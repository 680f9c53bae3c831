#include "tests/testing/http_client.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"

namespace metrics::test_util {

namespace {

class Socket {
 public:
  explicit Socket(int fd) : fd_(fd) {}
  ~Socket() {
    if (fd_ >= 0) ::close(fd_);
  }
  int fd() const { return fd_; }

 private:
  int fd_;
};

}  // namespace

absl::StatusOr<HttpResult> HttpCall(int port, absl::string_view method,
                                    absl::string_view path,
                                    absl::string_view body,
                                    absl::Duration timeout,
                                    absl::string_view headers) {
  const absl::Time deadline = absl::Now() + timeout;
  Socket socket(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<uint16_t>(port));
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(socket.fd(), reinterpret_cast<sockaddr*>(&address),
                sizeof(address)) != 0) {
    return absl::UnavailableError(
        absl::StrCat("connect to port ", port, ": ", std::strerror(errno)));
  }
  // JSON unless `headers` name another content type.
  const bool typed =
      absl::StrContains(absl::AsciiStrToLower(headers), "content-type:");
  const std::string request = absl::StrCat(
      method, " ", path, " HTTP/1.1\r\nHost: 127.0.0.1:", port,
      "\r\nConnection: close\r\n",
      typed ? "" : "Content-Type: application/json\r\n", headers,
      "Content-Length: ", body.size(), "\r\n\r\n", body);
  for (size_t sent = 0; sent < request.size();) {
    const ssize_t n = ::send(socket.fd(), request.data() + sent,
                             request.size() - sent, MSG_NOSIGNAL);
    if (n <= 0) break;  // the server may answer (413) before reading it all
    sent += static_cast<size_t>(n);
  }
  std::string response;
  while (true) {
    const absl::Duration left = deadline - absl::Now();
    if (left <= absl::ZeroDuration()) {
      return absl::DeadlineExceededError(
          absl::StrCat(method, " ", path, ": no complete response; got: ",
                       response));
    }
    pollfd p{socket.fd(), POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(absl::ToInt64Milliseconds(left))) <= 0) {
      continue;
    }
    char buffer[8192];
    const ssize_t n = ::recv(socket.fd(), buffer, sizeof(buffer), 0);
    if (n <= 0) break;
    response.append(buffer, static_cast<size_t>(n));
  }
  const size_t header_end = response.find("\r\n\r\n");
  if (header_end == std::string::npos) {
    return absl::DataLossError(absl::StrCat("malformed response: ", response));
  }
  HttpResult result;
  std::vector<std::string> lines =
      absl::StrSplit(response.substr(0, header_end), "\r\n");
  std::vector<std::string> status_line = absl::StrSplit(lines[0], ' ');
  if (status_line.size() < 2 || !absl::SimpleAtoi(status_line[1], &result.status)) {
    return absl::DataLossError(absl::StrCat("malformed status: ", lines[0]));
  }
  for (size_t i = 1; i < lines.size(); ++i) {
    const size_t colon = lines[i].find(':');
    if (colon == std::string::npos) continue;
    result.headers[absl::AsciiStrToLower(lines[i].substr(0, colon))] =
        std::string(absl::StripAsciiWhitespace(lines[i].substr(colon + 1)));
  }
  result.body = response.substr(header_end + 4);
  return result;
}

}  // namespace metrics::test_util
