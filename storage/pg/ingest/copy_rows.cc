#include "storage/pg/ingest/copy_rows.h"

#include <algorithm>
#include <array>
#include <cstring>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "storage/pg/sql_time.h"

namespace metrics::storage::pg {

namespace {

// Below glibc's mmap threshold (128 KB), so the buffer and libpqxx's copy
// of each piece reuse heap memory instead of mapping and faulting in fresh
// pages in every transaction.
constexpr size_t kSendBytes = 64 << 10;

}  // namespace

// tablewriter is deprecated in favour of stream_to, but only it can send a
// line already formatted (stream_to's write_raw_line is private).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
CopyRows::CopyRows(pqxx::transaction_base& tx, const std::string& table,
                   const std::vector<std::string>& columns)
    : writer_(std::make_unique<pqxx::tablewriter>(tx, table, columns.begin(),
                                                  columns.end())) {
  buffer_.reserve(kSendBytes + 4096);
}
#pragma GCC diagnostic pop

CopyRows::~CopyRows() = default;

void CopyRows::StartField() {
  if (!first_field_) buffer_ += '\t';
  first_field_ = false;
}

CopyRows& CopyRows::Int(int64_t value) {
  StartField();
  absl::StrAppend(&buffer_, value);
  return *this;
}

CopyRows& CopyRows::Text(absl::string_view text) {
  StartField();
  // Labels rarely hold a character COPY escapes: then in one append.
  // (absl's find_first_of builds a 256-entry table on each call.)
  const auto plain = [](char c) {
    return c != '\\' && c != '\t' && c != '\n' && c != '\r';
  };
  if (std::all_of(text.begin(), text.end(), plain)) {
    buffer_.append(text.data(), text.size());
    return *this;
  }
  for (char c : text) {
    switch (c) {
      case '\\':
        buffer_ += "\\\\";
        break;
      case '\t':
        buffer_ += "\\t";
        break;
      case '\n':
        buffer_ += "\\n";
        break;
      case '\r':
        buffer_ += "\\r";
        break;
      default:
        buffer_ += c;
    }
  }
  return *this;
}

CopyRows& CopyRows::Null() {
  StartField();
  buffer_ += "\\N";
  return *this;
}

CopyRows& CopyRows::Timestamp(int64_t micros) {
  StartField();
  AppendTimestampText(micros, buffer_);
  return *this;
}

CopyRows& CopyRows::Bytea(absl::string_view bytes) {
  // Each byte's two hex digits, looked up at once.
  static const auto* const kPairs = [] {
    static constexpr char kHex[] = "0123456789abcdef";
    auto* pairs = new std::array<char, 512>();
    for (int b = 0; b < 256; ++b) {
      (*pairs)[2 * b] = kHex[b >> 4];
      (*pairs)[2 * b + 1] = kHex[b & 0xf];
    }
    return pairs;
  }();
  StartField();
  // "\\x": COPY turns the doubled backslash into the one bytea's hex
  // format starts with.
  buffer_ += "\\\\x";
  const size_t at = buffer_.size();
  buffer_.resize(at + 2 * bytes.size());
  char* out = &buffer_[at];
  for (unsigned char c : bytes) {
    std::memcpy(out, &(*kPairs)[2 * c], 2);
    out += 2;
  }
  return *this;
}

void CopyRows::EndRow() {
  first_field_ = true;
  if (buffer_.size() >= kSendBytes) {
    Send();
  } else {
    buffer_ += '\n';
  }
}

void CopyRows::Send() {
  // write_raw_line ends the piece with the last row's newline.
  writer_->write_raw_line(buffer_);
  buffer_.clear();
}

void CopyRows::Complete() {
  if (!buffer_.empty()) {
    buffer_.pop_back();  // the newline write_raw_line adds back
    Send();
  }
  writer_->complete();
}

}  // namespace metrics::storage::pg
