// A minimal blocking HTTP/1.1 client for tests: one request per connection
// ("Connection: close"), the whole response read back. Deliberately
// independent of the server's own HTTP code, so tests check the wire.
//
// Thread-safety: thread-safe (no shared state).
#ifndef METRICS_TESTS_TESTING_HTTP_CLIENT_H_
#define METRICS_TESTS_TESTING_HTTP_CLIENT_H_

#include <map>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace metrics::test_util {

struct HttpResult {
  int status = 0;
  std::map<std::string, std::string> headers;  // names lower-cased
  std::string body;
};

// Sends `method path` to 127.0.0.1:port. UNAVAILABLE if it cannot connect,
// DEADLINE_EXCEEDED after `timeout`, DATA_LOSS for a malformed response.
// `headers`: more header lines, each ending in "\r\n"; the body is sent as
// application/json unless they give a Content-Type.
absl::StatusOr<HttpResult> HttpCall(int port, absl::string_view method,
                                    absl::string_view path,
                                    absl::string_view body = "",
                                    absl::Duration timeout = absl::Seconds(10),
                                    absl::string_view headers = "");

}  // namespace metrics::test_util

#endif  // METRICS_TESTS_TESTING_HTTP_CLIENT_H_
