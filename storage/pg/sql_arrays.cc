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

// Network byte order, as PostgreSQL's binary formats are.
void AppendInt32(std::string& out, uint32_t v) {
  const char bytes[4] = {static_cast<char>(v >> 24), static_cast<char>(v >> 16),
                         static_cast<char>(v >> 8), static_cast<char>(v)};
  out.append(bytes, 4);
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

std::string ByteaArrayBinary(const std::vector<std::string>& values) {
  constexpr uint32_t kByteaOid = 17;
  size_t size = 20;
  for (const std::string& v : values) size += 4 + v.size();
  std::string out;
  out.reserve(size);
  // Header: dimensions, has-nulls flag, element type; then each
  // dimension's length and lower bound (none for an empty array).
  AppendInt32(out, values.empty() ? 0 : 1);
  AppendInt32(out, 0);
  AppendInt32(out, kByteaOid);
  if (!values.empty()) {
    AppendInt32(out, static_cast<uint32_t>(values.size()));
    AppendInt32(out, 1);
  }
  for (const std::string& v : values) {
    AppendInt32(out, static_cast<uint32_t>(v.size()));
    out += v;
  }
  return out;
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
