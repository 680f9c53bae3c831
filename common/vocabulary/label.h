// The label rule of the signal vocabulary (signals.json, "labels"): a name,
// agent id, GPU UUID or stream id is 1 to kMaxLabelLength printable ASCII
// characters, with no space at either end; a unit the same up to
// kMaxUnitLength, and may be empty. The server refuses a batch that breaks
// it, and both clients refuse the value at record; the cases all three are
// tested on are client/testdata/labels.json.
//
// Thread-safety: a pure function.
#ifndef METRICS_COMMON_VOCABULARY_LABEL_H_
#define METRICS_COMMON_VOCABULARY_LABEL_H_

#include <cstddef>
#include <string>

#include "absl/strings/string_view.h"

namespace metrics::signals {

// Why `value` is no valid label ("must not be empty", "is 129 characters
// long; the limit is 128", ...), or "" when it is one.
std::string LabelProblem(absl::string_view value, size_t max_length, bool allow_empty);

}  // namespace metrics::signals

#endif  // METRICS_COMMON_VOCABULARY_LABEL_H_
