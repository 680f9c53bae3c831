#include "server/http/http_error.h"

#include "absl/strings/str_cat.h"
#include "common/json_text.h"

namespace metrics::server {

int HttpStatusForCode(absl::StatusCode code) {
  switch (code) {
    case absl::StatusCode::kOk:
      return 200;
    case absl::StatusCode::kCancelled:
      return 499;
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kOutOfRange:
      return 400;
    case absl::StatusCode::kDeadlineExceeded:
      return 504;
    case absl::StatusCode::kNotFound:
      return 404;
    case absl::StatusCode::kAlreadyExists:
    case absl::StatusCode::kAborted:
      return 409;
    case absl::StatusCode::kPermissionDenied:
      return 403;
    case absl::StatusCode::kUnauthenticated:
      return 401;
    case absl::StatusCode::kResourceExhausted:
      return 429;
    case absl::StatusCode::kFailedPrecondition:
      return 412;
    case absl::StatusCode::kUnimplemented:
      return 501;
    case absl::StatusCode::kUnavailable:
      return 503;
    default:
      return 500;
  }
}

void AppendErrorJson(std::string& out, const absl::Status& status) {
  absl::StrAppend(&out, "{\"code\":", static_cast<int>(status.code()),
                  ",\"message\":");
  common::AppendJsonString(out, status.message());
  out += ",\"details\":[]}";
}

HttpResponse ErrorResponse(const absl::Status& status, int http_status) {
  HttpResponse response;
  response.status =
      http_status != 0 ? http_status : HttpStatusForCode(status.code());
  AppendErrorJson(response.body, status);
  // RFC 9110: a 401 names the scheme the client should use.
  if (response.status == 401) {
    response.headers.emplace_back("WWW-Authenticate", "Bearer");
  }
  return response;
}

}  // namespace metrics::server
