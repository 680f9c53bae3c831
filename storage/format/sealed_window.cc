#include "storage/format/sealed_window.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <map>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "storage/format/value_codec.h"

namespace metrics::storage {

namespace {

constexpr uint8_t kFormat = 1;
constexpr uint8_t kXorStream = 0;
// The column of the reports' training batch indexes; series are from 1 on.
constexpr int64_t kBatchColumn = 0;

uint64_t ZigZag(int64_t v) {
  return (static_cast<uint64_t>(v) << 1) ^ static_cast<uint64_t>(v >> 63);
}

int64_t UnZigZag(uint64_t u) {
  return static_cast<int64_t>(u >> 1) ^ -static_cast<int64_t>(u & 1);
}

void PutVarint(std::string& out, uint64_t v) {
  char buffer[kMaxVarintBytes];
  out.append(buffer, WriteVarint(buffer, v) - buffer);
}

// Bits written most significant first.
class BitWriter {
 public:
  // The low `count` (1 to 64) bits of `v`.
  void Put(uint64_t v, int count) {
    while (count > 0) {
      if (free_ == 0) {
        bytes_.push_back('\0');
        free_ = 8;
      }
      const int take = std::min(count, free_);
      const uint64_t chunk = (v >> (count - take)) & ((uint64_t{1} << take) - 1);
      bytes_.back() = static_cast<char>(static_cast<uint8_t>(bytes_.back()) |
                                        (chunk << (free_ - take)));
      free_ -= take;
      count -= take;
    }
  }
  std::string Take() && { return std::move(bytes_); }

 private:
  std::string bytes_;
  int free_ = 0;  // bits left in the last byte
};

class BitReader {
 public:
  explicit BitReader(absl::string_view in) : in_(in) {}
  // False past the end.
  bool Get(int count, uint64_t& v) {
    if (position_ + static_cast<size_t>(count) > in_.size() * 8) return false;
    v = 0;
    while (count > 0) {
      const int offset = static_cast<int>(position_ % 8);
      const int take = std::min(count, 8 - offset);
      const uint64_t byte = static_cast<uint8_t>(in_[position_ / 8]);
      v = (v << take) | ((byte >> (8 - offset - take)) & ((uint64_t{1} << take) - 1));
      position_ += static_cast<size_t>(take);
      count -= take;
    }
    return true;
  }

 private:
  const absl::string_view in_;
  size_t position_ = 0;
};

std::string XorStream(const std::vector<double>& values) {
  BitWriter w;
  uint64_t previous = 0;
  int lead = -1, trail = 0;  // the window of the last written bits
  for (size_t i = 0; i < values.size(); ++i) {
    const uint64_t u = BitsOfDouble(values[i]);
    if (i == 0) {
      w.Put(u, 64);
      previous = u;
      continue;
    }
    const uint64_t x = u ^ previous;
    previous = u;
    if (x == 0) {
      w.Put(0, 1);
      continue;
    }
    const int l = std::min(__builtin_clzll(x), 31);
    const int t = __builtin_ctzll(x);
    if (lead >= 0 && l >= lead && t >= trail) {
      w.Put(0b10, 2);
      w.Put(x >> trail, 64 - lead - trail);
    } else {
      lead = l;
      trail = t;
      const int length = 64 - l - t;
      w.Put(0b11, 2);
      w.Put(static_cast<uint64_t>(l), 5);
      w.Put(static_cast<uint64_t>(length - 1), 6);
      w.Put(x >> t, length);
    }
  }
  return std::move(w).Take();
}

bool ReadXorStream(absl::string_view in, size_t count, std::vector<double>& out) {
  BitReader r(in);
  uint64_t previous = 0, bits = 0;
  int lead = -1, trail = 0;
  for (size_t i = 0; i < count; ++i) {
    if (i == 0) {
      if (!r.Get(64, previous)) return false;
      out.push_back(DoubleOfBits(previous));
      continue;
    }
    if (!r.Get(1, bits)) return false;
    if (bits == 0) {
      out.push_back(DoubleOfBits(previous));
      continue;
    }
    if (!r.Get(1, bits)) return false;
    if (bits == 1) {
      uint64_t l = 0, length = 0;
      if (!r.Get(5, l) || !r.Get(6, length)) return false;
      ++length;
      if (l + length > 64) return false;
      lead = static_cast<int>(l);
      trail = 64 - lead - static_cast<int>(length);
    } else if (lead < 0) {
      return false;  // a window before any was set
    }
    uint64_t x = 0;
    if (!r.Get(64 - lead - trail, x)) return false;
    previous ^= x << trail;
    out.push_back(DoubleOfBits(previous));
  }
  return true;
}

// The values as exact decimals of the fewest places (kind = places + 1)
// that read every one back bit for bit; nullopt when none does.
std::optional<std::string> DecimalColumn(const std::vector<double>& values, uint8_t& kind) {
  std::vector<int64_t> digits;
  for (int places = 0; places <= kMaxDecimals; ++places) {
    digits.clear();
    bool exact = true;
    for (double v : values) {
      const double scaled = v * kPowersOfTen[places];
      if (!(std::abs(scaled) < kExactDigits)) {
        exact = false;
        break;
      }
      const int64_t m = std::llround(scaled);
      if (BitsOfDouble(static_cast<double>(m) / kPowersOfTen[places]) != BitsOfDouble(v)) {
        exact = false;
        break;
      }
      digits.push_back(m);
    }
    if (!exact) continue;
    std::string out;
    int64_t previous = 0;
    for (int64_t m : digits) {
      PutVarint(out, ZigZag(m - previous));
      previous = m;
    }
    kind = static_cast<uint8_t>(places + 1);
    return out;
  }
  return std::nullopt;
}

bool ReadDecimalColumn(absl::string_view in, int places, size_t count,
                       std::vector<double>& out) {
  int64_t m = 0;
  for (size_t i = 0; i < count; ++i) {
    uint64_t delta = 0;
    if (!ReadVarint(in, delta)) return false;
    m += UnZigZag(delta);
    if (!(std::abs(static_cast<double>(m)) < kExactDigits)) return false;
    out.push_back(static_cast<double>(m) / kPowersOfTen[places]);
  }
  return in.empty();
}

absl::Status Corrupt(absl::string_view what) {
  return absl::DataLossError(absl::StrCat("sealed window: ", what));
}

}  // namespace

bool WindowReport::operator==(const WindowReport& o) const {
  if (time_us != o.time_us || batch != o.batch || values.size() != o.values.size()) {
    return false;
  }
  for (size_t i = 0; i < values.size(); ++i) {
    if (values[i].first != o.values[i].first ||
        BitsOfDouble(values[i].second) != BitsOfDouble(o.values[i].second)) {
      return false;
    }
  }
  return true;
}

std::string SealWindow(const std::vector<WindowReport>& reports) {
  std::string out(1, static_cast<char>(kFormat));
  PutVarint(out, reports.size());
  int64_t previous_time = 0, previous_step = 0;
  for (size_t i = 0; i < reports.size(); ++i) {
    const int64_t time = reports[i].time_us;
    if (i == 0) {
      PutVarint(out, ZigZag(time));
    } else {
      const int64_t step = time - previous_time;
      PutVarint(out, ZigZag(step - previous_step));
      previous_step = step;
    }
    previous_time = time;
  }
  // Each series' reports and values, by ascending id.
  std::map<int64_t, std::pair<std::vector<size_t>, std::vector<double>>> columns;
  for (size_t i = 0; i < reports.size(); ++i) {
    if (reports[i].batch.has_value()) {
      auto& [at, values] = columns[kBatchColumn];
      at.push_back(i);
      values.push_back(*reports[i].batch);
    }
    for (const auto& [id, value] : reports[i].values) {
      auto& [at, values] = columns[id];
      at.push_back(i);
      values.push_back(value);
    }
  }
  PutVarint(out, columns.size());
  int64_t previous_id = kBatchColumn - 1;
  for (const auto& [id, column] : columns) {
    const auto& [at, values] = column;
    PutVarint(out, static_cast<uint64_t>(id - previous_id));
    previous_id = id;
    PutVarint(out, at.size());
    if (at.size() < reports.size()) {
      std::string bitmap((reports.size() + 7) / 8, '\0');
      for (size_t i : at) bitmap[i / 8] = static_cast<char>(bitmap[i / 8] | (1 << (i % 8)));
      out += bitmap;
    }
    std::string payload = XorStream(values);
    uint8_t kind = kXorStream;
    uint8_t decimal_kind = 0;
    if (std::optional<std::string> decimal = DecimalColumn(values, decimal_kind);
        decimal && decimal->size() < payload.size()) {
      payload = *std::move(decimal);
      kind = decimal_kind;
    }
    out.push_back(static_cast<char>(kind));
    PutVarint(out, payload.size());
    out += payload;
  }
  return out;
}

absl::StatusOr<int64_t> SealedReportCount(absl::string_view head) {
  if (head.empty() || static_cast<uint8_t>(head[0]) != kFormat) {
    return Corrupt("not format 1");
  }
  head.remove_prefix(1);
  uint64_t count = 0;
  if (!ReadVarint(head, count) || count > (uint64_t{1} << 40)) {
    return Corrupt("a bad report count");
  }
  return static_cast<int64_t>(count);
}

absl::StatusOr<int64_t> SealedFirstTime(absl::string_view head) {
  ASSIGN_OR_RETURN(const int64_t count, SealedReportCount(head));
  if (count == 0) return Corrupt("no reports");
  uint64_t u = 0;
  head.remove_prefix(1);
  if (!ReadVarint(head, u) || !ReadVarint(head, u)) return Corrupt("the times end early");
  return UnZigZag(u);
}

absl::StatusOr<std::vector<WindowReport>> UnsealWindow(absl::string_view in) {
  if (in.empty() || static_cast<uint8_t>(in[0]) != kFormat) {
    return Corrupt("not format 1");
  }
  in.remove_prefix(1);
  uint64_t count = 0;
  // A report takes at least a byte of time: more reports than bytes is not
  // a window.
  if (!ReadVarint(in, count) || count > in.size()) return Corrupt("a bad report count");
  std::vector<WindowReport> reports(count);
  int64_t time = 0, step = 0;
  for (uint64_t i = 0; i < count; ++i) {
    uint64_t u = 0;
    if (!ReadVarint(in, u)) return Corrupt("the times end early");
    if (i == 0) {
      time = UnZigZag(u);
    } else {
      step += UnZigZag(u);
      time += step;
    }
    reports[i].time_us = time;
  }
  uint64_t series = 0;
  if (!ReadVarint(in, series) || series > in.size()) return Corrupt("a bad series count");
  int64_t id = kBatchColumn - 1;
  std::vector<double> values;
  for (uint64_t s = 0; s < series; ++s) {
    uint64_t step_id = 0, present = 0, length = 0;
    if (!ReadVarint(in, step_id) || step_id == 0 || step_id > (uint64_t{1} << 62)) {
      return Corrupt("a bad series id");
    }
    id += static_cast<int64_t>(step_id);
    if (!ReadVarint(in, present) || present > count) return Corrupt("a bad value count");
    std::vector<size_t> at;
    if (present < count) {
      const size_t bytes = (count + 7) / 8;
      if (in.size() < bytes) return Corrupt("a bitmap ends early");
      for (size_t i = 0; i < count; ++i) {
        if (static_cast<uint8_t>(in[i / 8]) & (1 << (i % 8))) at.push_back(i);
      }
      in.remove_prefix(bytes);
      if (at.size() != present) return Corrupt("a bitmap that disagrees with its count");
    } else {
      for (size_t i = 0; i < count; ++i) at.push_back(i);
    }
    if (in.empty()) return Corrupt("a column without its kind");
    const uint8_t kind = static_cast<uint8_t>(in[0]);
    in.remove_prefix(1);
    if (!ReadVarint(in, length) || length > in.size()) return Corrupt("a bad payload length");
    const absl::string_view payload = in.substr(0, length);
    in.remove_prefix(length);
    values.clear();
    const bool read = kind == kXorStream
                          ? ReadXorStream(payload, present, values)
                          : kind <= kMaxDecimals + 1 &&
                                ReadDecimalColumn(payload, kind - 1, present, values);
    if (!read || values.size() != present) return Corrupt("a column that does not decode");
    if (id == kBatchColumn) {
      for (size_t i = 0; i < at.size(); ++i) {
        const double b = values[i];
        if (!(b >= INT32_MIN && b <= INT32_MAX) || b != std::trunc(b)) {
          return Corrupt("a batch index that is not a 32-bit integer");
        }
        reports[at[i]].batch = static_cast<int32_t>(b);
      }
      continue;
    }
    for (size_t i = 0; i < at.size(); ++i) reports[at[i]].values.emplace_back(id, values[i]);
  }
  if (!in.empty()) return Corrupt("bytes after the last column");
  return reports;
}

}  // namespace metrics::storage
