#include "storage/format/value_codec.h"

#include <cmath>
#include <cstring>

namespace metrics::storage {

namespace {

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "the packed formats are little-endian");

constexpr uint8_t kNegative = 8;

double FromDigits(uint64_t digits, int decimals, bool negative) {
  // Both operands are exact, so the quotient is the double nearest to the
  // decimal: the same as parsing its text, and as the SQL decoder's.
  const double magnitude = static_cast<double>(digits) / kPowersOfTen[decimals];
  return negative ? -magnitude : magnitude;
}

// nearbyint in the default rounding mode (ties to even) for 0 <= x < 2^53,
// without its library call: the encoder runs for every stored value and
// rollup statistic. Past 2^52 every double is an integer already.
double RoundToInteger(double x) {
  constexpr double kNoFractionBits = 4503599627370496.0;  // 2^52
  return x < kNoFractionBits ? (x + kNoFractionBits) - kNoFractionBits : x;
}

int VarintSize(uint64_t value) {
  int size = 1;
  while (value >= 0x80) {
    value >>= 7;
    ++size;
  }
  return size;
}

}  // namespace

EncodedValue EncodeValue(double value) {
  const bool negative = std::signbit(value);
  const double magnitude = std::fabs(value);
  // A decimal of k places scaled by 10^j, j >= k, lands within a few ulps
  // (relative) of an integer; anything farther cannot pass the exact check
  // below. Checked at the most places first, that turns away most values
  // that are no decimal at all (a rate, a rollup's sum) in one step, and
  // per k it saves the exact check's division.
  auto near_integer = [](double scaled, double rounded) {
    return std::fabs(scaled - rounded) <= scaled * 0x1p-40;
  };
  const double most = magnitude * kPowersOfTen[kMaxDecimals];
  if (most < kExactDigits && !near_integer(most, RoundToInteger(most))) {
    return {kRawDouble, BitsOfDouble(value)};
  }
  for (int k = 0; k <= kMaxDecimals; ++k) {
    const double scaled = magnitude * kPowersOfTen[k];
    if (!(scaled < kExactDigits)) break;  // also NaN
    const double rounded = RoundToInteger(scaled);
    if (!near_integer(scaled, rounded)) continue;
    const uint64_t digits = static_cast<uint64_t>(rounded);
    if (BitsOfDouble(FromDigits(digits, k, negative)) == BitsOfDouble(value)) {
      if (k == 0 && !negative && digits != 0) {
        const int zeros = __builtin_ctzll(digits);
        const uint64_t shifted = (digits >> zeros) << 6 | zeros;
        if (VarintSize(shifted) < VarintSize(digits)) {
          return {kPowerOfTwo, shifted};
        }
      }
      return {static_cast<uint8_t>(negative ? kNegative + k : k), digits};
    }
  }
  return {kRawDouble, BitsOfDouble(value)};
}

char* WriteValuePayload(char* out, const EncodedValue& v) {
  if (v.kind != kRawDouble) return WriteVarint(out, v.digits);
  std::memcpy(out, &v.digits, 8);
  return out + 8;
}

bool ReadValuePayload(absl::string_view& in, uint8_t kind, double& value) {
  if (kind == kRawDouble) {
    if (in.size() < 8) return false;
    std::memcpy(&value, in.data(), 8);
    in.remove_prefix(8);
    return true;
  }
  uint64_t digits;
  if (kind == kPowerOfTwo) {
    if (!ReadVarint(in, digits)) return false;
    value = std::ldexp(static_cast<double>(digits >> 6),
                       static_cast<int>(digits & 63));
    return true;
  }
  const bool negative = kind >= kNegative;
  const int decimals = negative ? kind - kNegative : kind;
  if (decimals > kMaxDecimals) return false;
  if (!ReadVarint(in, digits)) return false;
  value = FromDigits(digits, decimals, negative);
  return true;
}

char* WriteVarint(char* out, uint64_t value) {
  while (value >= 0x80) {
    *out++ = static_cast<char>((value & 0x7f) | 0x80);
    value >>= 7;
  }
  *out++ = static_cast<char>(value);
  return out;
}

bool ReadVarint(absl::string_view& in, uint64_t& value) {
  value = 0;
  for (int shift = 0; shift < 64; shift += 7) {
    if (in.empty()) return false;
    const auto byte = static_cast<uint8_t>(in.front());
    in.remove_prefix(1);
    if (shift == 63 && byte > 1) return false;
    value |= uint64_t{byte & 0x7fu} << shift;
    if (byte < 0x80) return true;
  }
  return false;
}

}  // namespace metrics::storage
