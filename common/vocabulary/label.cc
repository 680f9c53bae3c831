#include "common/vocabulary/label.h"

#include "absl/strings/str_cat.h"

namespace metrics::signals {

std::string LabelProblem(absl::string_view value, size_t max_length, bool allow_empty) {
  if (value.empty()) {
    return allow_empty ? "" : "must not be empty";
  }
  if (value.size() > max_length) {
    return absl::StrCat("is ", value.size(), " characters long; the limit is ", max_length);
  }
  for (size_t i = 0; i < value.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(value[i]);
    if (c < 0x20 || c > 0x7e) {
      return absl::StrCat("has a non-printable character (byte ", static_cast<int>(c),
                          ") at offset ", i, "; only printable ASCII is allowed");
    }
  }
  if (value.front() == ' ' || value.back() == ' ') {
    return "must not start or end with a space";
  }
  return "";
}

}  // namespace metrics::signals
