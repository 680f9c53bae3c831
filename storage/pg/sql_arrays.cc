#include "storage/pg/sql_arrays.h"

#include <cstdint>

#include "absl/strings/str_cat.h"

namespace metrics::storage::pg {

namespace {

constexpr char kHex[] = "0123456789abcdef";

// Each byte's value as a hex digit, -1 for any other byte.
struct HexDigits {
  int8_t value[256];
  constexpr HexDigits() : value() {
    for (int c = 0; c < 256; ++c) {
      value[c] = c >= '0' && c <= '9'   ? c - '0'
                 : c >= 'a' && c <= 'f' ? c - 'a' + 10
                 : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                        : -1;
    }
  }
};
constexpr HexDigits kHexDigits;

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

bool DecodeByteaHexInto(absl::string_view text, std::string& out) {
  out.clear();
  if (text.size() < 2 || text[0] != '\\' || text[1] != 'x' ||
      text.size() % 2 != 0) {
    return false;
  }
  // Written through a pointer: the ingest writer decodes every stored
  // rollup bucket it merges, and an append per byte was a tenth of its CPU.
  out.resize((text.size() - 2) / 2);
  const auto* in = reinterpret_cast<const unsigned char*>(text.data()) + 2;
  char* to = &out[0];
  int bad = 0;
  for (size_t i = 0; i < out.size(); ++i, in += 2) {
    const int hi = kHexDigits.value[in[0]], lo = kHexDigits.value[in[1]];
    bad |= hi | lo;  // negative if either is
    to[i] = static_cast<char>((hi & 0xf) << 4 | (lo & 0xf));
  }
  if (bad < 0) {
    out.clear();
    return false;
  }
  return true;
}

std::string DecodeByteaHex(absl::string_view text) {
  std::string out;
  DecodeByteaHexInto(text, out);
  return out;
}

}  // namespace metrics::storage::pg
