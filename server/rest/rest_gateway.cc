#include "server/rest/rest_gateway.h"

#include <google/protobuf/util/json_util.h>
#include <grpcpp/client_context.h>
#include <grpcpp/completion_queue.h>
#include <grpcpp/support/byte_buffer.h>
#include <grpcpp/impl/codegen/proto_utils.h>

#include <algorithm>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/grpc_status.h"
#include "server/rest/chart_json.h"
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

// One call through the generic stub, driven step by step on its own
// completion queue by the HTTP connection's thread: one operation at a
// time, each awaited before the next starts.
class GatewayCall {
 public:
  GatewayCall(grpc::GenericStub& stub, const std::string& method,
              const HttpRequest& request, absl::Duration timeout,
              absl::Duration check_interval)
      : client_gone_(request.client_gone), check_interval_(check_interval) {
    if (timeout > absl::ZeroDuration()) {
      context_.set_deadline(absl::ToChronoTime(absl::Now() + timeout));
    }
    context_.AddMetadata("x-forwarded-for", request.client_address);
    // The caller's credentials, as gRPC clients send them. gRPC takes only
    // printable ASCII in metadata, and a long value would pass its metadata
    // limit and break the gateway's connection (measured: "Broken pipe" for
    // 10 000 bytes). Neither can be a token (75 bytes with its scheme), so
    // such a value is replaced by one that fails like any bad token.
    if (absl::string_view authorization = request.Header("authorization");
        !authorization.empty()) {
      constexpr size_t kMaxAuthorizationBytes = 1024;
      const bool usable =
          authorization.size() <= kMaxAuthorizationBytes &&
          std::all_of(authorization.begin(), authorization.end(),
                      [](char c) { return c >= 0x20 && c < 0x7f; });
      context_.AddMetadata("authorization", usable
                                                ? std::string(authorization)
                                                : std::string("invalid"));
    }
    call_ = stub.PrepareCall(&context_, method, &queue_);
  }

  ~GatewayCall() {
    if (!finished_) {
      context_.TryCancel();
      Finish().IgnoreError();  // the answer is no longer wanted
    }
    queue_.Shutdown();
    void* tag;
    bool ok;
    while (queue_.Next(&tag, &ok)) {
    }
  }

  // Starts the call, sends the request and reads the initial metadata.
  // False when the call failed (Finish gives the status).
  bool Start(const Message& request) {
    call_->StartCall(this);
    if (!Await()) return false;
    grpc::ByteBuffer buffer;
    bool own = false;
    if (!grpc::SerializationTraits<Message>::Serialize(request, &buffer, &own)
             .ok()) {
      return false;
    }
    call_->Write(buffer, this);
    if (!Await()) return false;
    call_->WritesDone(this);
    if (!Await()) return false;
    call_->ReadInitialMetadata(this);
    return Await();
  }

  // The next response message; false at the end of the stream or on
  // failure.
  bool Read(Message* response) {
    grpc::ByteBuffer buffer;
    call_->Read(&buffer, this);
    if (!Await()) return false;
    return grpc::SerializationTraits<Message>::Deserialize(&buffer, response)
        .ok();
  }

  absl::Status Finish() {
    if (!finished_) {
      finished_ = true;
      call_->Finish(&status_, this);
      Await();
    }
    return common::FromGrpcStatus(status_);
  }

  const std::multimap<grpc::string_ref, grpc::string_ref>& initial_metadata()
      const {
    return context_.GetServerInitialMetadata();
  }
  const std::multimap<grpc::string_ref, grpc::string_ref>& trailing_metadata()
      const {
    return context_.GetServerTrailingMetadata();
  }

 private:
  // Waits for the operation in flight; while it waits, a client that has
  // left cancels the call (the operation then completes, not ok).
  bool Await() {
    void* tag;
    bool ok = false;
    while (true) {
      const auto next = queue_.AsyncNext(
          &tag, &ok, absl::ToChronoTime(absl::Now() + check_interval_));
      if (next == grpc::CompletionQueue::GOT_EVENT) return ok;
      if (next == grpc::CompletionQueue::SHUTDOWN) return false;
      if (client_gone_ && client_gone_()) context_.TryCancel();
    }
  }

  grpc::ClientContext context_;
  grpc::CompletionQueue queue_;
  std::unique_ptr<grpc::GenericClientAsyncReaderWriter> call_;
  std::function<bool()> client_gone_;
  const absl::Duration check_interval_;
  grpc::Status status_;
  bool finished_ = false;
};

void AddMetadataHeaders(const GatewayCall& call, HttpResponse& response) {
  for (const auto& [key, value] : call.initial_metadata()) {
    const std::string name(key.data(), key.size());
    const std::string text(value.data(), value.size());
    if (name == "deprecation") response.headers.emplace_back("Deprecation", text);
    if (name == "link") response.headers.emplace_back("Link", text);
    response.headers.emplace_back(absl::StrCat("Grpc-Metadata-", name), text);
  }
}

std::string StreamErrorLine(const absl::Status& status) {
  std::string line = "{\"error\":";
  AppendErrorJson(line, status);
  line += "}\n";
  return line;
}

}  // namespace

absl::StatusOr<std::unique_ptr<RestGateway>> RestGateway::Create(
    std::shared_ptr<grpc::Channel> channel,
    const std::vector<std::string>& services, RestGatewayOptions options) {
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
  return std::unique_ptr<RestGateway>(new RestGateway(
      std::move(channel), *std::move(routes), std::move(options)));
}

RestGateway::RestGateway(std::shared_ptr<grpc::Channel> channel,
                         RouteTable routes, RestGatewayOptions options)
    : stub_(std::move(channel)),
      routes_(std::move(routes)),
      options_(std::move(options)) {}

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
  const absl::string_view content_type = request.Header("content-type");
  absl::StatusOr<collector::ExportMetricsServiceRequest> decoded =
      DecodeOtlpBody(content_type, request.Header("content-encoding"), request.body);
  if (!decoded.ok()) {
    const absl::StatusCode code = decoded.status().code();
    return OtlpErrorResponse(content_type, decoded.status(),
                             code == absl::StatusCode::kResourceExhausted    ? 413
                             : code == absl::StatusCode::kFailedPrecondition ? 415
                                                                             : 400);
  }
  auto call = std::make_shared<GatewayCall>(
      stub_,
      absl::StrCat("/", collector::MetricsService::service_full_name(), "/Export"),
      request, options_.request_timeout, options_.client_check_interval);
  collector::ExportMetricsServiceResponse answer;
  const bool read = call->Start(*decoded) && call->Read(&answer);
  absl::Status status = call->Finish();
  if (status.ok() && !read) status = absl::InternalError("the call sent no answer");
  if (!status.ok()) {
    // The service's hint when the ingest queue is full.
    absl::Duration retry_after = absl::Seconds(1);
    int64_t ms = 0;
    if (auto hint = call->trailing_metadata().find("retry-after-ms");
        hint != call->trailing_metadata().end() &&
        absl::SimpleAtoi(absl::string_view(hint->second.data(), hint->second.size()), &ms)) {
      retry_after = absl::Milliseconds(ms);
    }
    HttpResponse response = OtlpErrorResponse(content_type, status, 0, retry_after);
    AddMetadataHeaders(*call, response);
    return response;
  }
  HttpResponse response;
  AddMetadataHeaders(*call, response);
  if (absl::StartsWith(absl::AsciiStrToLower(content_type), "application/x-protobuf")) {
    response.content_type = "application/x-protobuf";
    response.body = answer.SerializeAsString();
    return response;
  }
  google::protobuf::util::JsonPrintOptions options;
  std::string json;
  if (!google::protobuf::util::MessageToJsonString(answer, &json, options).ok()) {
    return ErrorResponse(absl::InternalError("the answer could not be written"));
  }
  response.body = std::move(json);
  return response;
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
  std::unique_ptr<Message> rpc_request(request_type->New());
  if (absl::Status built =
          BuildRequest(match, request.body, request.query, rpc_request.get());
      !built.ok()) {
    return ErrorResponse(built);
  }
  const bool streaming = method->server_streaming();
  // An export's chunks are the bytes of a file, sent as they come.
  const bool file = method->output_type() == v1::ExportChunk::descriptor();
  auto call = std::make_shared<GatewayCall>(
      stub_,
      absl::StrCat("/", method->service()->full_name(), "/", method->name()),
      request, streaming ? absl::ZeroDuration() : options_.request_timeout,
      options_.client_check_interval);
  std::shared_ptr<Message> first(response_type->New());
  if (!call->Start(*rpc_request) || !call->Read(first.get())) {
    absl::Status status = call->Finish();
    if (status.ok() && streaming) {
      // An empty stream: a 200 with no lines.
      HttpResponse empty;
      AddMetadataHeaders(*call, empty);
      return empty;
    }
    if (status.ok()) status = absl::InternalError("the call sent no answer");
    HttpResponse error = ErrorResponse(status);
    if (streaming && !file) {
      error.body = StreamErrorLine(status);
    }
    AddMetadataHeaders(*call, error);
    return error;
  }
  HttpResponse response;
  AddMetadataHeaders(*call, response);
  if (!streaming) {
    const absl::Status finished = call->Finish();
    if (absl::Status written = finished.ok()
                                   ? AppendJson(response.body, *first)
                                   : finished;
        !written.ok()) {
      HttpResponse error = ErrorResponse(written);
      error.headers = std::move(response.headers);
      return error;
    }
    return response;
  }
  if (file) {
    const auto& chunk = static_cast<const v1::ExportChunk&>(*first);
    response.content_type = chunk.content_type();
    response.headers.emplace_back(
        "Content-Disposition", absl::StrCat("attachment; filename=\"", chunk.file_name(), "\""));
    response.stream = [call, next = std::move(first)](std::string& out) mutable {
      if (next == nullptr) {
        next = std::make_shared<v1::ExportChunk>();
        if (!call->Read(next.get())) {
          // A failure after the status went out: the body ends without
          // chunked encoding's last chunk, so no client takes it as whole.
          return call->Finish().ok() ? StreamStep::kEnd : StreamStep::kAbort;
        }
      }
      out += static_cast<const v1::ExportChunk&>(*next).data();
      next.reset();
      return StreamStep::kMore;
    };
    return response;
  }
  // Each message becomes one line, sent as soon as it arrives: the
  // connection's thread waits in Read only once the line before is out.
  response.stream = [call, response_type, next = std::move(first)](
                        std::string& chunk) mutable {
    if (next == nullptr) {
      next.reset(response_type->New());
      if (!call->Read(next.get())) {
        if (absl::Status status = call->Finish(); !status.ok()) {
          chunk += StreamErrorLine(status);
        }
        return StreamStep::kEnd;
      }
    }
    chunk += "{\"result\":";
    const absl::Status written = AppendJson(chunk, *next);
    next.reset();
    if (!written.ok()) {
      chunk += "null}\n";
      chunk += StreamErrorLine(written);
      return StreamStep::kEnd;
    }
    chunk += "}\n";
    return StreamStep::kMore;
  };
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

}  // namespace metrics::server
