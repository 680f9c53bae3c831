// A REST request body, read strictly: RFC 8259 JSON (no single quotes,
// unquoted keys, trailing commas, comments, duplicate keys or invalid
// UTF-8), mapped onto a message by the proto3 JSON mapping with no
// guessing: a repeated field takes an array and nothing else, a message an
// object, a number field a number (or its decimal text, as the mapping
// allows), a Timestamp an RFC 3339 string. Every error is INVALID_ARGUMENT
// beginning "request body" and naming the field by its path as sent
// ("batch.reports[0].values[3]"), never echoing bytes that are not
// printable ASCII. A google.protobuf.Struct field takes any JSON object,
// its members named by key in the path ('metrics.avgMetrics["node-1"]');
// numbers in it must fit a double.
//
// One pass, with no document tree: memory stays within a small multiple of
// the message itself, whatever the body.
//
// Thread-safety: pure functions.
#ifndef METRICS_SERVER_REST_JSON_BODY_H_
#define METRICS_SERVER_REST_JSON_BODY_H_

#include <google/protobuf/descriptor.h>
#include <google/protobuf/message.h>

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace metrics::server {

// A field path from the top message down ({batch, trial_id}).
using FieldPath = std::vector<const google::protobuf::FieldDescriptor*>;

// Where a route reads a body as grpc-gateway does (for the platform's own
// clients), against the strict default.
struct JsonBodyOptions {
  // A field the path sets may be given in the body too: the caller checks
  // that both give the same value (`repeated_bound` of ParseJsonBody).
  bool path_fields_may_repeat = false;
  // Python's json module's NaN, Infinity and -Infinity tokens are taken,
  // each as the string the platform stores for it ("NaN", ...).
  bool python_non_finite = false;
};

// Sets `message` from `json`. A field on one of `bound` (set from the
// request's path) is refused: the body cannot override the path; with
// options.path_fields_may_repeat it is set, and its path is added to
// `repeated_bound`.
absl::Status ParseJsonBody(absl::string_view json,
                           const std::vector<FieldPath>& bound,
                           google::protobuf::Message* message,
                           const JsonBodyOptions& options = {},
                           std::vector<FieldPath>* repeated_bound = nullptr);

// `json` with Python's bare NaN, Infinity and -Infinity tokens (outside
// strings) written as the strings "NaN", "Infinity" and "-Infinity".
std::string QuotePythonNonFinite(absl::string_view json);

// A field of `type` by its proto name or its lowerCamelCase JSON name.
const google::protobuf::FieldDescriptor* FindFieldByAnyName(
    const google::protobuf::Descriptor* type, absl::string_view name);

}  // namespace metrics::server

#endif  // METRICS_SERVER_REST_JSON_BODY_H_
