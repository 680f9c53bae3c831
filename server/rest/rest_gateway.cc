#include "server/rest/rest_gateway.h"

#include <google/protobuf/util/json_util.h>
#include <grpcpp/client_context.h>
#include <grpcpp/completion_queue.h>
#include <grpcpp/support/byte_buffer.h>
#include <grpcpp/impl/codegen/proto_utils.h>

#include <algorithm>
#include <optional>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "common/grpc_status.h"
#include "common/presented_credential.h"
#include "common/retry_after.h"
#include "server/rest/chart_json.h"
#include "server/rest/gateway_stream.h"
#include "server/http/http_error.h"
#include "server/otlp/otlp_body.h"
#include "proto/opentelemetry/proto/collector/metrics/v1/metrics_service.grpc.pb.h"

namespace metrics::server {

namespace {

using google::protobuf::Message;

// Chart data goes through the hand-made writer; everything else through
// protobuf's JSON printer with grpc-gateway's options.
absl::Status AppendJson(std::string& out, const Message& message) {
  if (const auto* chart =
          dynamic_cast<const v1::QuerySeriesResponse*>(&message)) {
    AppendChartJson(out, *chart);
    return absl::OkStatus();
  }
  google::protobuf::util::JsonPrintOptions options;
  options.always_print_primitive_fields = true;
  std::string json;
  const auto printed =
      google::protobuf::util::MessageToJsonString(message, &json, options);
  if (!printed.ok()) {
    return absl::InternalError(absl::StrCat("writing JSON: ",
                                            printed.message().as_string()));
  }
  out += json;
  return absl::OkStatus();
}

// One piece of a call's initial metadata as the headers REST clients read.
void AddMetadataHeader(const std::string& name, const std::string& text,
                       HttpResponse& response) {
  if (name == "deprecation") response.headers.emplace_back("Deprecation", text);
  if (name == "link") response.headers.emplace_back("Link", text);
  response.headers.emplace_back(absl::StrCat("Grpc-Metadata-", name), text);
}

void AddMetadataHeaders(
    const std::multimap<grpc::string_ref, grpc::string_ref>& metadata,
    HttpResponse& response) {
  for (const auto& [key, value] : metadata) {
    AddMetadataHeader(std::string(key.data(), key.size()),
                      std::string(value.data(), value.size()), response);
  }
}

// A unary call's answer: its response as JSON, or its error, with the
// wait a refusal asks for (a full ingest queue, a limited address, an
// unreachable database) as Retry-After, in whole seconds.
HttpResponse UnaryAnswer(absl::Status status, const Message& answer) {
  HttpResponse response;
  if (status.ok()) status = AppendJson(response.body, answer);
  if (status.ok()) return response;
  response = ErrorResponse(status);
  if (status.code() == absl::StatusCode::kResourceExhausted ||
      status.code() == absl::StatusCode::kUnavailable) {
    AddRetryAfter(status, response);
  }
  return response;
}

std::string StreamErrorLine(const absl::Status& status) {
  std::string line = "{\"error\":";
  AppendErrorJson(line, status);
  line += "}\n";
  return line;
}

// The answer of a server stream once its first message is in or it ended
// without one: an error status, an empty 200, or the messages as the body.
HttpResponse StreamAnswer(const std::shared_ptr<GatewayStream>& call,
                          const Message* response_type, bool file) {
  grpc::ByteBuffer first;
  absl::Status end;
  if (!call->TakeFirst(first, end)) {
    if (end.ok()) {
      // An empty stream: a 200 with no lines.
      HttpResponse empty;
      AddMetadataHeaders(call->initial_metadata(), empty);
      return empty;
    }
    HttpResponse error = ErrorResponse(end);
    if (!file) error.body = StreamErrorLine(end);
    AddMetadataHeaders(call->initial_metadata(), error);
    return error;
  }
  HttpResponse response;
  AddMetadataHeaders(call->initial_metadata(), response);
  // Each message becomes one piece: a file's bytes, or one NDJSON line. A
  // message that cannot be read ends the body: a file's without chunked
  // encoding's last chunk (so no client takes it as whole), a line stream's
  // with an error line.
  auto piece = [file, response_type](const grpc::ByteBuffer& message,
                                     std::string& out) -> StreamStep {
    grpc::ByteBuffer copy(message);
    if (file) {
      v1::ExportChunk chunk;
      if (!grpc::SerializationTraits<Message>::Deserialize(&copy, &chunk).ok()) {
        return StreamStep::kAbort;
      }
      out += chunk.data();
      return StreamStep::kMore;
    }
    std::unique_ptr<Message> next(response_type->New());
    absl::Status written =
        grpc::SerializationTraits<Message>::Deserialize(&copy, next.get()).ok()
            ? absl::OkStatus()
            : absl::InternalError("an answer could not be read");
    out += "{\"result\":";
    if (written.ok()) written = AppendJson(out, *next);
    if (!written.ok()) {
      out += "null}\n";
      out += StreamErrorLine(written);
      return StreamStep::kEnd;
    }
    out += "}\n";
    return StreamStep::kMore;
  };
  if (file) {
    v1::ExportChunk chunk;
    grpc::ByteBuffer copy(first);
    if (grpc::SerializationTraits<Message>::Deserialize(&copy, &chunk).ok()) {
      response.content_type = chunk.content_type();
      response.headers.emplace_back(
          "Content-Disposition",
          absl::StrCat("attachment; filename=\"", chunk.file_name(), "\""));
    }
  }
  auto pending = std::make_shared<std::optional<grpc::ByteBuffer>>(std::move(first));
  response.stream = [call, pending, piece, file](HttpResponse::Deliver deliver) {
    if (pending->has_value()) {
      std::string out;
      const StreamStep step = piece(**pending, out);
      pending->reset();
      deliver(std::move(out), step);
      return;
    }
    call->Next([piece, file, deliver = std::move(deliver)](
                   const grpc::ByteBuffer* message, absl::Status end) {
      std::string out;
      if (message != nullptr) {
        const StreamStep step = piece(*message, out);
        deliver(std::move(out), step);
      } else if (file) {
        deliver("", end.ok() ? StreamStep::kEnd : StreamStep::kAbort);
      } else {
        if (!end.ok()) out = StreamErrorLine(end);
        deliver(std::move(out), StreamStep::kEnd);
      }
    });
  };
  return response;
}


}  // namespace

absl::StatusOr<std::unique_ptr<RestGateway>> RestGateway::Create(
    std::shared_ptr<grpc::Channel> channel,
    const std::vector<std::string>& services, RestGatewayOptions options,
    UnaryMethods unary) {
  std::vector<const google::protobuf::ServiceDescriptor*> descriptors;
  for (const std::string& name : services) {
    const google::protobuf::ServiceDescriptor* service =
        google::protobuf::DescriptorPool::generated_pool()->FindServiceByName(
            name);
    if (service == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat("REST gateway: unknown service ", name));
    }
    descriptors.push_back(service);
  }
  absl::StatusOr<RouteTable> routes = RouteTable::Build(descriptors);
  if (!routes.ok()) return routes.status();
  // Server streams go over `channel`; a unary method only in process.
  for (const Route& route : routes->routes()) {
    const google::protobuf::MethodDescriptor* method = route.method;
    const std::string path =
        absl::StrCat("/", method->service()->full_name(), "/", method->name());
    if (!method->server_streaming() && !unary.contains(path)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "REST gateway: the routed unary method ", path, " is not served in this process"));
    }
  }
  return std::unique_ptr<RestGateway>(
      new RestGateway(std::move(channel), *std::move(routes),
                      std::move(options), std::move(unary)));
}

RestGateway::RestGateway(std::shared_ptr<grpc::Channel> channel,
                         RouteTable routes, RestGatewayOptions options,
                         UnaryMethods unary)
    : stub_(std::move(channel)),
      routes_(std::move(routes)),
      options_(std::move(options)),
      unary_(std::move(unary)) {}

HttpResponse RestGateway::Handle(const HttpRequest& request) const {
  if (request.method == "OPTIONS" &&
      !request.Header("Access-Control-Request-Method").empty()) {
    return Preflight(request);
  }
  std::string allowed;
  // HEAD matches GET routes; the HTTP server drops the body.
  absl::StatusOr<RouteMatch> match =
      routes_.Match(request.method, request.path, &allowed);
  HttpResponse response;
  if (!match.ok()) {
    const bool wrong_method =
        match.status().code() == absl::StatusCode::kUnimplemented;
    response = ErrorResponse(match.status(), wrong_method ? 405 : 0);
    if (wrong_method) response.headers.emplace_back("Allow", allowed);
  } else {
    response = Call(request, *match);
  }
  AddCors(request, response);
  AddDeprecationHeaders(request.path, response);
  return response;
}

void RestGateway::AddDeprecationHeaders(absl::string_view path,
                                        HttpResponse& response) const {
  const Route* route = routes_.MatchPath(path);
  if (route == nullptr || !route->method->options().deprecated()) return;
  for (const auto& [name, value] : options_.deprecation_headers) {
    const bool present = std::any_of(
        response.headers.begin(), response.headers.end(),
        [&name = name](const auto& h) { return h.first == name; });
    if (!present) response.headers.emplace_back(name, value);
  }
}

HttpResponse RestGateway::ExportOtlp(const HttpRequest& request) const {
  namespace collector = ::opentelemetry::proto::collector::metrics::v1;
  const std::string content_type(request.Header("content-type"));
  absl::StatusOr<collector::ExportMetricsServiceRequest> decoded =
      DecodeOtlpBody(content_type, request.Header("content-encoding"), request.body);
  if (!decoded.ok()) return OtlpBodyErrorResponse(content_type, decoded.status());
  const std::string path =
      absl::StrCat("/", collector::MetricsService::service_full_name(), "/Export");
  auto served = unary_.find(path);
  if (served == unary_.end()) {
    return ErrorResponse(absl::UnimplementedError("OTLP export is not served here"));
  }
  return CallInProcess(
      request, *served->second,
      std::make_unique<collector::ExportMetricsServiceRequest>(*std::move(decoded)),
      &collector::ExportMetricsServiceResponse::default_instance(),
      [content_type](absl::Status status, const Message& response) {
        return OtlpExportAnswer(content_type, status, response);
      });
}

HttpResponse RestGateway::Call(const HttpRequest& request,
                               const RouteMatch& match) const {
  const google::protobuf::MethodDescriptor* method = match.route->method;
  const Message* request_type =
      google::protobuf::MessageFactory::generated_factory()->GetPrototype(
          method->input_type());
  const Message* response_type =
      google::protobuf::MessageFactory::generated_factory()->GetPrototype(
          method->output_type());
  const std::string path =
      absl::StrCat("/", method->service()->full_name(), "/", method->name());
  if (options_.guard != nullptr) {
    if (std::optional<absl::Status> refused = options_.guard->RefusalBeforeCall(
            common::PresentedCredential(
                request.Header("authorization"),
                request.Header(common::kAllocationTokenHeader)),
            request.client_address, path,
            absl::Now() + options_.request_timeout)) {
      HttpResponse response = ErrorResponse(*refused);
      // As the call would have answered: a line stream's error is its line.
      if (method->server_streaming() &&
          response_type->GetDescriptor() != v1::ExportChunk::descriptor()) {
        response.body = StreamErrorLine(*refused);
      }
      AddRetryAfter(*refused, response);
      return response;
    }
  }
  std::unique_ptr<Message> rpc_request(request_type->New());
  if (absl::Status built =
          BuildRequest(match, request.body, request.query, rpc_request.get());
      !built.ok()) {
    return ErrorResponse(built);
  }
  if (method->server_streaming()) {
    return Stream(request, path, *rpc_request, response_type);
  }
  // Create made sure every routed unary method is served in process.
  const UnaryMethod& served = *unary_.at(path);
  return CallInProcess(request, served, std::move(rpc_request), response_type, UnaryAnswer);
}

HttpResponse RestGateway::CallInProcess(
    const HttpRequest& request, const UnaryMethod& method,
    std::unique_ptr<Message> rpc_request, const Message* response_type,
    std::function<HttpResponse(absl::Status, const Message&)> answer) const {
  // What the call and its answer need until both are done: the deferred
  // answer may be dropped (the client left) while the work still runs.
  struct InProcess {
    UnaryCall call;
    std::unique_ptr<Message> request;
    std::unique_ptr<Message> response;
    absl::Mutex mu;
    HttpResponse answer ABSL_GUARDED_BY(mu);
  };
  auto state = std::make_shared<InProcess>();
  state->request = std::move(rpc_request);
  state->response.reset(response_type->New());
  state->call.credential = common::PresentedCredential(
      request.Header("authorization"),
      request.Header(common::kAllocationTokenHeader));
  state->call.peer = request.client_address;
  // As over gRPC: the store's calls end by the request's timeout (at most
  // kStoreCallTimeout), and the client has its answer by then, a 504 if the
  // work still runs.
  auto deferred = std::make_shared<HttpResponse::Deferred>();
  absl::Duration timeout = kStoreCallTimeout;
  if (options_.request_timeout > absl::ZeroDuration()) {
    timeout = std::min(timeout, options_.request_timeout);
    deferred->deadline = absl::Now() + options_.request_timeout;
  }
  state->call.deadline = absl::Now() + timeout;
  state->call.request = state->request.get();
  state->call.response = state->response.get();
  deferred->wait = [state, &method, answer = std::move(answer)](
                       std::function<void()> ready) {
    ServeUnaryCall(method, state->call,
                   [state, answer, ready = std::move(ready)](absl::Status status) {
                     HttpResponse response = answer(std::move(status), *state->response);
                     for (const auto& [key, value] : state->call.initial_metadata) {
                       AddMetadataHeader(key, value, response);
                     }
                     {
                       absl::MutexLock lock(&state->mu);
                       state->answer = std::move(response);
                     }
                     ready();
                   });
  };
  deferred->answer = [state] {
    absl::MutexLock lock(&state->mu);
    return std::move(state->answer);
  };
  HttpResponse response;
  response.deferred = std::move(deferred);
  return response;
}

HttpResponse RestGateway::Stream(const HttpRequest& request,
                                 const std::string& path,
                                 const Message& rpc_request,
                                 const Message* response_type) const {
  grpc::ByteBuffer serialized;
  bool own = false;
  if (!grpc::SerializationTraits<Message>::Serialize(rpc_request, &serialized,
                                                     &own)
           .ok()) {
    return ErrorResponse(absl::InternalError("the request could not be sent"));
  }
  // An export's chunks are the bytes of a file, sent as they come.
  const bool file = response_type->GetDescriptor() == v1::ExportChunk::descriptor();
  std::shared_ptr<GatewayStream> call =
      GatewayStream::Start(stub_, path, std::move(serialized), request);
  // The status waits for the first message; no thread waits with it.
  auto deferred = std::make_shared<HttpResponse::Deferred>();
  deferred->wait = [call](std::function<void()> ready) {
    call->WhenFirst(std::move(ready));
  };
  deferred->answer = [call, response_type, file] {
    return StreamAnswer(call, response_type, file);
  };
  HttpResponse response;
  response.deferred = std::move(deferred);
  return response;
}

void RestGateway::AddCors(const HttpRequest& request,
                          HttpResponse& response) const {
  const absl::string_view origin = request.Header("Origin");
  if (options_.cors_origin.empty() || origin.empty()) return;
  if (options_.cors_origin != "*" && options_.cors_origin != origin) return;
  response.headers.emplace_back("Access-Control-Allow-Origin",
                                std::string(origin));
  response.headers.emplace_back("Vary", "Origin");
  response.headers.emplace_back("Access-Control-Expose-Headers",
                                "Deprecation, Link");
}

HttpResponse RestGateway::Preflight(const HttpRequest& request) const {
  const absl::string_view origin = request.Header("Origin");
  const bool allowed =
      !options_.cors_origin.empty() && !origin.empty() &&
      (options_.cors_origin == "*" || options_.cors_origin == origin);
  if (!allowed) {
    return ErrorResponse(
        absl::PermissionDeniedError(absl::StrCat(
            "cross-origin requests from \"", origin,
            "\" are not allowed (see metricsd --cors-origin)")));
  }
  HttpResponse response;
  response.status = 204;
  AddCors(request, response);
  response.headers.emplace_back("Access-Control-Allow-Methods",
                                "GET, POST, PATCH, PUT, DELETE");
  response.headers.emplace_back("Access-Control-Allow-Headers",
                                "Content-Type, Authorization");
  response.headers.emplace_back("Access-Control-Max-Age", "600");
  return response;
}

void AddRetryAfter(const absl::Status& refusal, HttpResponse& response) {
  if (std::optional<absl::Duration> wait = common::RetryAfterOf(refusal)) {
    response.headers.emplace_back(
        "Retry-After",
        absl::StrCat(absl::ToInt64Seconds(absl::Ceil(*wait, absl::Seconds(1)))));
  }
}

}  // namespace metrics::server
