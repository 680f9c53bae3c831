// One scalar field of a request set from the text a client wrote for it:
// the one set of rules for the values of a JSON body and for path and query
// values, so a value refused in one place is refused in every other
// ("1e400" is not a finite number in a body, a path or a query alike).
//
// The rules are the proto3 JSON mapping's, strictly: integers as plain
// digits (or, written as a JSON number, any whole number a double holds
// exactly), floating point as a finite JSON number or the mapping's "NaN",
// "Infinity" and "-Infinity" strings, enums by name or number, bytes in
// base64, Timestamp and Duration as RFC 3339 and "1.5s" text.
//
// Thread-safety: pure functions.
#ifndef METRICS_SERVER_REST_FIELD_TEXT_H_
#define METRICS_SERVER_REST_FIELD_TEXT_H_

#include <google/protobuf/descriptor.h>
#include <google/protobuf/message.h>

#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace metrics::server {

// How a value's text was written.
enum class TextForm {
  kJsonString,   // the contents of a JSON string ("12", "NaN", "gpu_util")
  kJsonLiteral,  // a JSON number, true or false, as written
  kUrl,          // a path or query value
};

// Sets (or, for a repeated field, adds) `field` of `message` from `text`.
// A message field must be a Timestamp or a Duration. On text the rules
// refuse, INVALID_ARGUMENT saying what is wrong with the value alone
// ("\"abc\" is not an int32"): the caller names where it was sent.
absl::Status SetFieldFromText(google::protobuf::Message* message,
                              const google::protobuf::FieldDescriptor* field,
                              absl::string_view text, TextForm form);

// Digits with an optional leading minus: the one integer text accepted in
// bodies, paths and queries (no "+", spaces, or other forms absl's parsers
// also take).
bool IsPlainInteger(absl::string_view text);

// The JSON number grammar (RFC 8259 §6): the one decimal text accepted.
bool IsJsonNumber(absl::string_view text);

// Sets a google.protobuf.Timestamp from RFC 3339 text or a Duration from
// "1.5s" text, as the JSON mapping writes them; false for other text.
bool SetTimeFromText(const std::string& text,
                     google::protobuf::Message* message);

}  // namespace metrics::server

#endif  // METRICS_SERVER_REST_FIELD_TEXT_H_
