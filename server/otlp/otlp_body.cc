#include "server/otlp/otlp_body.h"

#include <zlib.h>

#include <google/protobuf/util/json_util.h>

#include <cmath>
#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/retry_after.h"
#include "google/rpc/status.pb.h"
#include "server/http/http_error.h"

namespace metrics::server {

namespace {

using Request = opentelemetry::proto::collector::metrics::v1::ExportMetricsServiceRequest;

// The media type without parameters, lower case: "application/json".
std::string MediaType(absl::string_view content_type) {
  return absl::AsciiStrToLower(
      absl::StripAsciiWhitespace(content_type.substr(0, content_type.find(';'))));
}

// `body` inflated (gzip), at most `max_bytes` of it.
absl::StatusOr<std::string> Gunzip(absl::string_view body, size_t max_bytes) {
  z_stream z{};
  // 16 + MAX_WBITS: a gzip header and trailer, not raw deflate.
  if (inflateInit2(&z, 16 + MAX_WBITS) != Z_OK) {
    return absl::InternalError("zlib: inflateInit2 failed");
  }
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(body.data()));
  z.avail_in = static_cast<uInt>(body.size());
  std::string out;
  char chunk[64 * 1024];
  int r = Z_OK;
  while (r != Z_STREAM_END) {
    z.next_out = reinterpret_cast<Bytef*>(chunk);
    z.avail_out = sizeof chunk;
    r = inflate(&z, Z_NO_FLUSH);
    if (r != Z_OK && r != Z_STREAM_END) {
      inflateEnd(&z);
      return absl::InvalidArgumentError(
          "the body is not valid gzip (Content-Encoding: gzip)");
    }
    out.append(chunk, sizeof chunk - z.avail_out);
    if (out.size() > max_bytes) {
      inflateEnd(&z);
      return absl::ResourceExhaustedError(absl::StrCat(
          "the body inflates past the limit of ", max_bytes, " bytes"));
    }
    if (r == Z_OK && z.avail_in == 0 && z.avail_out != 0) {
      inflateEnd(&z);
      return absl::InvalidArgumentError("the gzip body ends early");
    }
  }
  inflateEnd(&z);
  return out;
}

}  // namespace

absl::StatusOr<Request> DecodeOtlpBody(absl::string_view content_type,
                                       absl::string_view content_encoding,
                                       absl::string_view body, size_t max_bytes) {
  const std::string encoding =
      absl::AsciiStrToLower(absl::StripAsciiWhitespace(content_encoding));
  std::string inflated;
  if (encoding == "gzip") {
    absl::StatusOr<std::string> text = Gunzip(body, max_bytes);
    if (!text.ok()) return text.status();
    inflated = *std::move(text);
    body = inflated;
  } else if (!encoding.empty() && encoding != "identity") {
    return absl::FailedPreconditionError(absl::StrCat(
        "Content-Encoding \"", encoding.substr(0, 32), "\": only gzip is taken"));
  }
  if (body.size() > max_bytes) {
    return absl::ResourceExhaustedError(
        absl::StrCat("the body is larger than the limit of ", max_bytes, " bytes"));
  }
  const std::string type = MediaType(content_type);
  Request request;
  if (type == "application/x-protobuf") {
    if (!request.ParseFromArray(body.data(), static_cast<int>(body.size()))) {
      return absl::InvalidArgumentError(
          "the body is not an OTLP ExportMetricsServiceRequest (protobuf)");
    }
    return request;
  }
  if (type == "application/json") {
    google::protobuf::util::JsonParseOptions options;
    options.ignore_unknown_fields = true;  // OTLP's rule for receivers
    const auto parsed = google::protobuf::util::JsonStringToMessage(
        std::string(body), &request, options);
    if (!parsed.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "the body is not an OTLP ExportMetricsServiceRequest (JSON): ",
          std::string(parsed.message()).substr(0, 200)));
    }
    return request;
  }
  return absl::FailedPreconditionError(absl::StrCat(
      "Content-Type \"", type.substr(0, 64),
      "\": OTLP/HTTP takes application/x-protobuf or application/json"));
}

HttpResponse OtlpErrorResponse(absl::string_view content_type, const absl::Status& status,
                               int http_status, absl::Duration retry_after) {
  HttpResponse response = ErrorResponse(status, http_status);
  if (MediaType(content_type) == "application/x-protobuf") {
    google::rpc::Status answer;
    answer.set_code(static_cast<int>(status.code()));
    answer.set_message(std::string(status.message()));
    response.content_type = "application/x-protobuf";
    response.body = answer.SerializeAsString();
  }
  if (response.status == 429 || response.status == 503) {
    const double seconds = std::ceil(absl::ToDoubleSeconds(retry_after));
    response.headers.emplace_back("Retry-After",
                                  absl::StrCat(std::max(1.0, seconds)));
  }
  return response;
}

HttpResponse OtlpBodyErrorResponse(absl::string_view content_type, const absl::Status& status) {
  const absl::StatusCode code = status.code();
  return OtlpErrorResponse(content_type, status,
                           code == absl::StatusCode::kResourceExhausted    ? 413
                           : code == absl::StatusCode::kFailedPrecondition ? 415
                                                                           : 400);
}

HttpResponse OtlpExportAnswer(absl::string_view content_type, const absl::Status& status,
                              const google::protobuf::Message& response) {
  if (!status.ok()) {
    return OtlpErrorResponse(content_type, status, 0,
                             common::RetryAfterOf(status).value_or(absl::Seconds(1)));
  }
  HttpResponse answer;
  if (MediaType(content_type) == "application/x-protobuf") {
    answer.content_type = "application/x-protobuf";
    answer.body = response.SerializeAsString();
    return answer;
  }
  std::string json;
  if (!google::protobuf::util::MessageToJsonString(response, &json).ok()) {
    return ErrorResponse(absl::InternalError("the answer could not be written"));
  }
  answer.body = std::move(json);
  return answer;
}

}  // namespace metrics::server
