// The REST gateway's routes, read from the google.api.http annotations of
// the services' methods (so routes are declared once, in the .proto files),
// and the mapping of an HTTP request onto a method's request message, with
// grpc-gateway's rules:
// - path variables ("{trial_id}", "{labels.trial_id}") set those fields;
// - body "*" is the whole request as JSON; body "<field>" that field;
// - without body "*", query parameters set fields by proto or JSON name,
//   dotted for nested fields ("labels.agentId"), repeated for lists;
//   timestamps as RFC 3339 strings.
// Every error is INVALID_ARGUMENT naming the parameter or body field.
// The platform's own clients' routes (ReportTrialMetrics, which its harness
// posts) read the body as grpc-gateway does where that differs: a field the
// path sets may be repeated in the body with the same value, and Python's
// NaN and Infinity tokens are taken (JsonBodyOptions).
//
// Thread-safety: a RouteTable is immutable after Build; safe to share.
#ifndef METRICS_SERVER_REST_HTTP_ROUTES_H_
#define METRICS_SERVER_REST_HTTP_ROUTES_H_

#include <google/protobuf/descriptor.h>
#include <google/protobuf/message.h>

#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "server/rest/json_body.h"

namespace metrics::server {

struct Route {
  std::string http_method;  // "GET", "POST", "PATCH", ...
  std::string pattern;      // as annotated, for messages
  // Per path segment: the literal, or the field path of a variable.
  struct Segment {
    bool variable = false;
    std::string text;
  };
  std::vector<Segment> segments;
  std::string body;  // "", "*" or a field name
  JsonBodyOptions body_options;
  const google::protobuf::MethodDescriptor* method = nullptr;
};

// A route matched to a request path, with its variables' values.
struct RouteMatch {
  const Route* route = nullptr;
  std::vector<std::pair<std::string, std::string>> variables;
};

class RouteTable {
 public:
  // The routes of every annotated method of `services`. INVALID_ARGUMENT
  // for a malformed pattern or a variable naming no field.
  static absl::StatusOr<RouteTable> Build(
      const std::vector<const google::protobuf::ServiceDescriptor*>& services);

  // NOT_FOUND when no route has this path; UNIMPLEMENTED (the gateway's
  // 405) when routes have it but none for `http_method`, with `allowed`
  // set to their methods (HEAD beside GET). HEAD matches GET routes.
  absl::StatusOr<RouteMatch> Match(absl::string_view http_method,
                                   absl::string_view path,
                                   std::string* allowed) const;

  // The route, of any method, that `path` would match (the most literal
  // segments first), or null.
  const Route* MatchPath(absl::string_view path) const;

  const std::vector<Route>& routes() const { return routes_; }

 private:
  std::vector<Route> routes_;
};

// Fills `request` (of the route's input type) from the body, the path
// variables and the query parameters.
absl::Status BuildRequest(
    const RouteMatch& match, absl::string_view body,
    const std::vector<std::pair<std::string, std::string>>& query,
    google::protobuf::Message* request);

}  // namespace metrics::server

#endif  // METRICS_SERVER_REST_HTTP_ROUTES_H_
