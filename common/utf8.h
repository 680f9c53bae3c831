// UTF-8 validity (RFC 3629): no overlong forms, no surrogates, nothing past
// U+10FFFF. For every door that takes text from strangers: protobuf refuses
// invalid UTF-8 in string fields only when it parses, far from the input.
//
// Thread-safety: pure functions.
#ifndef METRICS_COMMON_UTF8_H_
#define METRICS_COMMON_UTF8_H_

#include "absl/strings/string_view.h"

namespace metrics::common {

bool IsValidUtf8(absl::string_view text);

}  // namespace metrics::common

#endif  // METRICS_COMMON_UTF8_H_
