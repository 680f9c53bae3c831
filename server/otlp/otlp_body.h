// The body of an OTLP/HTTP export (POST /v1/metrics) as a request message:
// protobuf (application/x-protobuf) or OTLP's JSON (application/json:
// lowerCamelCase keys, enums as numbers, 64-bit integers as strings or
// numbers, unknown fields ignored, as OTLP's specification requires of a
// receiver; the strict JSON rules of the rest of the API do not apply
// here), either of them gzip-compressed (Content-Encoding: gzip). A body
// inflates to at most `max_bytes`: a gzip bomb is refused once that much
// is inflated, never inflated whole.
//
// Its errors are answered as the specification asks: a google.rpc.Status
// in the request's encoding; so is the service's answer to the export.
//
// Thread-safety: pure functions.
#ifndef METRICS_SERVER_OTLP_OTLP_BODY_H_
#define METRICS_SERVER_OTLP_OTLP_BODY_H_

#include <google/protobuf/message.h>

#include <cstddef>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "proto/opentelemetry/proto/collector/metrics/v1/metrics_service.pb.h"
#include "server/http/http_server.h"

namespace metrics::server {

inline constexpr size_t kMaxOtlpBodyBytes = size_t{64} << 20;

// RESOURCE_EXHAUSTED when the body (inflated) passes `max_bytes` (HTTP
// 413); FAILED_PRECONDITION for a content type or encoding it does not
// take (415); INVALID_ARGUMENT for bytes that are not such a message, or
// not gzip when they say so (400).
absl::StatusOr<opentelemetry::proto::collector::metrics::v1::ExportMetricsServiceRequest>
DecodeOtlpBody(absl::string_view content_type, absl::string_view content_encoding,
               absl::string_view body, size_t max_bytes = kMaxOtlpBodyBytes);

// The error answer to an OTLP/HTTP request of `content_type`: a
// google.rpc.Status {code, message}, as protobuf for a protobuf request,
// else as the JSON every other route answers with; the HTTP status from the
// code unless `http_status` is given. A 429 or 503 says when to retry
// (Retry-After, whole seconds, at least 1), as OTLP's exporters expect.
HttpResponse OtlpErrorResponse(absl::string_view content_type, const absl::Status& status,
                               int http_status = 0,
                               absl::Duration retry_after = absl::Seconds(1));

// The answer to a body DecodeOtlpBody refused, by its code: 413 past the
// size limit, 415 for a content type or encoding it does not take, 400
// otherwise.
HttpResponse OtlpBodyErrorResponse(absl::string_view content_type, const absl::Status& status);

// The answer to an export of `content_type` that the service answered with
// `status` and `response` (an ExportMetricsServiceResponse): the response in
// the request's encoding, or OtlpErrorResponse with the service's wait (the
// ingest queue full) or a second.
HttpResponse OtlpExportAnswer(absl::string_view content_type, const absl::Status& status,
                              const google::protobuf::Message& response);

}  // namespace metrics::server

#endif  // METRICS_SERVER_OTLP_OTLP_BODY_H_
