#include "server/http/http_target.h"

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/utf8.h"

namespace metrics::server {

namespace {

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// Decodes %XX escapes (and "+" as a space when `plus_is_space`), then
// checks the result. `what` names the part for the error.
absl::StatusOr<std::string> Decode(absl::string_view text, bool plus_is_space,
                                   absl::string_view what) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '%') {
      const int high = i + 1 < text.size() ? HexValue(text[i + 1]) : -1;
      const int low = i + 2 < text.size() ? HexValue(text[i + 2]) : -1;
      if (high < 0 || low < 0) {
        return absl::InvalidArgumentError(absl::StrCat(
            what,
            ": malformed percent-encoding (\"%\" must be followed by "
            "two hexadecimal digits)"));
      }
      out.push_back(static_cast<char>(high * 16 + low));
      i += 2;
    } else if (c == '+' && plus_is_space) {
      out.push_back(' ');
    } else {
      out.push_back(c);
    }
  }
  for (char c : out) {
    const auto byte = static_cast<unsigned char>(c);
    if (byte < 0x20 || byte == 0x7F) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, ": contains a control character"));
    }
  }
  if (!common::IsValidUtf8(out)) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": is not valid UTF-8"));
  }
  return out;
}

}  // namespace

std::string QuoteForMessage(absl::string_view text) {
  constexpr size_t kMaxEcho = 64;
  bool printable = text.size() <= kMaxEcho;
  for (char c : text) printable = printable && absl::ascii_isprint(c);
  if (printable) return absl::StrCat("\"", text, "\"");
  return absl::StrCat("(a value of ", text.size(), " bytes)");
}

absl::StatusOr<RequestTarget> ParseRequestTarget(absl::string_view target) {
  // Absolute-form: the scheme and authority say nothing this server uses.
  for (absl::string_view scheme : {"http://", "https://"}) {
    if (absl::StartsWithIgnoreCase(target, scheme)) {
      target.remove_prefix(scheme.size());
      const size_t slash = target.find_first_of("/?");
      target = slash == absl::string_view::npos ? "/" : target.substr(slash);
      if (target.front() == '?') {
        return absl::InvalidArgumentError(
            "request target: an absolute URL needs a path");
      }
      break;
    }
  }
  if (target.empty() || target.front() != '/') {
    return absl::InvalidArgumentError(
        "request target: must be a path starting with \"/\"");
  }
  if (target.find('#') != absl::string_view::npos) {
    return absl::InvalidArgumentError(
        "request target: a fragment (\"#\") is not sent to servers");
  }
  RequestTarget out;
  const size_t question = target.find('?');
  absl::StatusOr<std::string> path =
      Decode(target.substr(0, question), /*plus_is_space=*/false, "path");
  if (!path.ok()) return path.status();
  out.path = *std::move(path);
  if (question == absl::string_view::npos) return out;
  for (absl::string_view pair :
       absl::StrSplit(target.substr(question + 1), '&', absl::SkipEmpty())) {
    const size_t equals = pair.find('=');
    absl::StatusOr<std::string> key =
        Decode(pair.substr(0, equals), true, "a query parameter's name");
    if (!key.ok()) return key.status();
    if (key->empty()) {
      return absl::InvalidArgumentError("query: a parameter has an empty name");
    }
    const std::string what =
        absl::StrCat("query parameter ", QuoteForMessage(*key));
    absl::StatusOr<std::string> value =
        equals == absl::string_view::npos
            ? std::string()
            : Decode(pair.substr(equals + 1), true, what);
    if (!value.ok()) return value.status();
    out.query.emplace_back(*std::move(key), *std::move(value));
  }
  return out;
}

}  // namespace metrics::server
