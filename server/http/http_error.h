// The REST gateway's error shape, as grpc-gateway writes it:
// {"code": <gRPC code>, "message": "...", "details": []} with the HTTP
// status mapped from the gRPC code (INVALID_ARGUMENT 400, NOT_FOUND 404,
// ALREADY_EXISTS and ABORTED 409, FAILED_PRECONDITION 412,
// RESOURCE_EXHAUSTED 429, CANCELLED 499, UNAVAILABLE 503,
// DEADLINE_EXCEEDED 504, ...).
//
// Thread-safety: pure functions.
#ifndef METRICS_SERVER_HTTP_HTTP_ERROR_H_
#define METRICS_SERVER_HTTP_HTTP_ERROR_H_

#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "server/http/http_server.h"

namespace metrics::server {

int HttpStatusForCode(absl::StatusCode code);

// Appends {"code": ..., "message": ..., "details": []}.
void AppendErrorJson(std::string& out, const absl::Status& status);

// The error response for `status`, with the HTTP status from its code or,
// when `http_status` is given, that one (for transport errors such as 413).
HttpResponse ErrorResponse(const absl::Status& status, int http_status = 0);

}  // namespace metrics::server

#endif  // METRICS_SERVER_HTTP_HTTP_ERROR_H_
