// The target of an HTTP/1.1 request (RFC 9112 §3.2: origin-form, or
// absolute-form whose scheme and authority are ignored), split into its
// decoded path and query parameters, strictly: a malformed percent-escape,
// a decoded control character (NUL included) or invalid UTF-8 is an
// INVALID_ARGUMENT naming the path or the parameter, and no message ever
// echoes the offending bytes. In the query, "+" is a space
// (application/x-www-form-urlencoded, as browsers send it).
//
// Thread-safety: pure functions.
#ifndef METRICS_SERVER_HTTP_HTTP_TARGET_H_
#define METRICS_SERVER_HTTP_HTTP_TARGET_H_

#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace metrics::server {

struct RequestTarget {
  std::string path;  // decoded, starts with "/"
  std::vector<std::pair<std::string, std::string>> query;  // decoded, in order
};

absl::StatusOr<RequestTarget> ParseRequestTarget(absl::string_view target);

// `text` for an error message: itself when it is printable ASCII of at most
// 64 characters, else a description that echoes nothing of it.
std::string QuoteForMessage(absl::string_view text);

}  // namespace metrics::server

#endif  // METRICS_SERVER_HTTP_HTTP_TARGET_H_
