// Appends JSON text pieces to a string: quoted strings and numbers. For the
// hand-made writers on hot paths (raw metric rows, chart data, errors),
// where building a document object first would cost more than the output.
//
// Thread-safety: pure functions.
#ifndef METRICS_COMMON_JSON_TEXT_H_
#define METRICS_COMMON_JSON_TEXT_H_

#include <string>

#include "absl/strings/string_view.h"

namespace metrics::common {

// Appends `text` as a JSON string literal, quotes included. `text` is
// expected to be UTF-8; control characters are escaped.
void AppendJsonString(std::string& out, absl::string_view text);

// Appends `value` as the shortest JSON number that reads back as the same
// double. REQUIRES: std::isfinite(value) (JSON has no NaN or infinity).
void AppendJsonNumber(std::string& out, double value);

}  // namespace metrics::common

#endif  // METRICS_COMMON_JSON_TEXT_H_
