#include "storage/pg/sql_arrays.h"

#include "absl/strings/str_cat.h"

namespace metrics::storage::pg {

namespace {

constexpr char kHex[] = "0123456789abcdef";

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// Appends `text` as a double-quoted array element.
void AppendElement(std::string& out, absl::string_view text) {
  out += '"';
  for (char c : text) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  out += '"';
}

}  // namespace

std::string IntArray(const std::vector<int64_t>& values) {
  std::string out = "{";
  for (size_t i = 0; i < values.size(); ++i) {
    if (i > 0) out += ',';
    absl::StrAppend(&out, values[i]);
  }
  return out + "}";
}

std::string TextArray(const std::vector<std::string>& values) {
  std::string out = "{";
  for (size_t i = 0; i < values.size(); ++i) {
    if (i > 0) out += ',';
    AppendElement(out, values[i]);
  }
  return out + "}";
}

std::string ByteaHex(absl::string_view bytes) {
  std::string out = "\\x";
  out.reserve(2 + 2 * bytes.size());
  for (unsigned char c : bytes) {
    out += kHex[c >> 4];
    out += kHex[c & 0xf];
  }
  return out;
}

std::string ByteaArray(const std::vector<std::string>& values) {
  std::string out = "{";
  for (size_t i = 0; i < values.size(); ++i) {
    if (i > 0) out += ',';
    // "\\x..." inside the element: the array parser turns \\ into \ and
    // bytea then reads \x as hex.
    out += "\"\\\\x";
    for (unsigned char c : values[i]) {
      out += kHex[c >> 4];
      out += kHex[c & 0xf];
    }
    out += '"';
  }
  return out + "}";
}

std::string DecodeByteaHex(absl::string_view text) {
  if (text.size() < 2 || text[0] != '\\' || text[1] != 'x' ||
      text.size() % 2 != 0) {
    return "";
  }
  std::string out;
  out.reserve((text.size() - 2) / 2);
  for (size_t i = 2; i < text.size(); i += 2) {
    const int hi = HexValue(text[i]), lo = HexValue(text[i + 1]);
    if (hi < 0 || lo < 0) return "";
    out += static_cast<char>(hi << 4 | lo);
  }
  return out;
}

}  // namespace metrics::storage::pg
