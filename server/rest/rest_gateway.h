// The REST/JSON gateway: serves every annotated RPC of the given services
// (http_routes.h). A unary method this process serves in-process
// (UnaryMethods, every routed unary method) is called directly through
// ServeUnaryCall, the function gRPC's door calls too, so both doors share
// its checks, deadlines and statuses; server streams are gRPC calls to
// this same server over a private Unix socket (gateway_socket.h).
// grpc-gateway's conventions: lowerCamelCase JSON with zero values, enums as
// names, RFC 3339 times; chart data in the hand-made columnar form of
// chart_json.h; server streams as newline-delimited JSON, one
// {"result": ...} per message and {"error": ...} for a failure mid-stream;
// errors as {"code", "message", "details"} with the HTTP status from the
// gRPC code, and a refusal's wait on a 429 or 503 as Retry-After.
//
// A call's initial metadata comes back as "Grpc-Metadata-<key>" headers, and
// "deprecation" and "link" also as the standard Deprecation and Link headers
// (the legacy shims set them). The HTTP client's address is the caller's
// address (over the socket, as "x-forwarded-for" metadata).
//
// Thread-safety: Handle is thread-safe. A unary call holds no thread: its
// answer is deferred until its work is done. A stream holds no thread
// either: its answer is deferred until its first message, then fed as
// messages come (gateway_stream.h).
#ifndef METRICS_SERVER_REST_REST_GATEWAY_H_
#define METRICS_SERVER_REST_REST_GATEWAY_H_

#include <grpcpp/channel.h>
#include <grpcpp/generic/generic_stub.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "server/auth/call_guard.h"
#include "server/rest/http_routes.h"
#include "server/http/http_server.h"
#include "server/rest/rest_gateway_options.h"
#include "server/services/unary_call.h"

namespace metrics::server {

// Adds Retry-After (whole seconds) to `response` when `refusal` asks its
// caller to wait (a limited address: common::RetryAfterOf).
void AddRetryAfter(const absl::Status& refusal, HttpResponse& response);

class RestGateway {
 public:
  // Routes the annotated methods of `services` (full names, of generated
  // code linked in). INVALID_ARGUMENT for a malformed route annotation or an
  // unknown service.
  // `unary`: the unary methods served in this process, called directly
  // (ServeUnaryCall) rather than over `channel`; they must outlive the
  // gateway.
  static absl::StatusOr<std::unique_ptr<RestGateway>> Create(
      std::shared_ptr<grpc::Channel> channel,
      const std::vector<std::string>& services, RestGatewayOptions options,
      UnaryMethods unary = {});

  HttpResponse Handle(const HttpRequest& request) const;

  // POST /v1/metrics, OTLP/HTTP: the body decoded and the answer written as
  // server/otlp/otlp_body.h says, MetricsService/Export called in process
  // (ServeUnaryCall) between the two.
  HttpResponse ExportOtlp(const HttpRequest& request) const;

  // Adds options.deprecation_headers when `path` is a deprecated method's
  // route and `response` lacks them. For the HTTP server's own errors too.
  void AddDeprecationHeaders(absl::string_view path,
                             HttpResponse& response) const;

  const RouteTable& routes() const { return routes_; }

 private:
  RestGateway(std::shared_ptr<grpc::Channel> channel, RouteTable routes,
              RestGatewayOptions options, UnaryMethods unary);

  HttpResponse Call(const HttpRequest& request, const RouteMatch& match) const;
  // A unary method served in this process: its answer deferred until the
  // work is done, so no thread waits for it.
  // `answer` makes the HTTP answer of the call's status and response.
  HttpResponse CallInProcess(
      const HttpRequest& request, const UnaryMethod& method,
      std::unique_ptr<google::protobuf::Message> rpc_request,
      const google::protobuf::Message* response_type,
      std::function<HttpResponse(absl::Status, const google::protobuf::Message&)>
          answer) const;
  // A server-streaming method's call (`path`), its messages as the body.
  HttpResponse Stream(const HttpRequest& request, const std::string& path,
                      const google::protobuf::Message& rpc_request,
                      const google::protobuf::Message* response_type) const;
  // The CORS headers for `request`, if its origin is allowed.
  void AddCors(const HttpRequest& request, HttpResponse& response) const;
  HttpResponse Preflight(const HttpRequest& request) const;

  mutable grpc::GenericStub stub_;  // thread-safe; its methods are not const
  const RouteTable routes_;
  const RestGatewayOptions options_;
  const UnaryMethods unary_;
};

}  // namespace metrics::server

#endif  // METRICS_SERVER_REST_REST_GATEWAY_H_
