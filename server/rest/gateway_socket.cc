#include "server/rest/gateway_socket.h"

#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"

namespace metrics::server {

absl::StatusOr<std::unique_ptr<GatewaySocket>> GatewaySocket::Create() {
  const char* tmp = std::getenv("TMPDIR");
  std::string pattern = absl::StrCat(
      tmp != nullptr && *tmp != '\0' ? tmp : "/tmp", "/metricsd-XXXXXX");
  std::vector<char> buffer(pattern.begin(), pattern.end());
  buffer.push_back('\0');
  // mkdtemp makes the directory with mode 0700.
  if (::mkdtemp(buffer.data()) == nullptr) {
    return absl::UnavailableError(
        absl::StrCat("REST gateway: cannot make a private directory like ",
                     pattern, ": ", std::strerror(errno)));
  }
  std::string directory(buffer.data());
  std::string path = directory + "/gateway";
  return std::unique_ptr<GatewaySocket>(
      new GatewaySocket(std::move(directory), std::move(path)));
}

GatewaySocket::~GatewaySocket() {
  ::unlink(path_.c_str());
  ::rmdir(directory_.c_str());
}

}  // namespace metrics::server
