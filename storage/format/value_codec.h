// The byte-level pieces of the packed formats (raw reports, rollups):
// unsigned varints, and doubles written exactly in as few bytes as their
// precision allows. A value that is a decimal of at most kMaxDecimals places
// (37.25, 2100, 16106127360) is written as its digits m (a varint) and its
// number of places k, and read back as the double nearest to m / 10^k: the
// one the decimal's text parses to. The encoder keeps that form only when
// reading it back gives the same bits; anything else (a ratio like 1/3,
// NaN) is written as its 8 bytes. A positive integer with many trailing
// zero bits, as byte counts in pages or MiB are, is written as m and k with
// value m * 2^k when that is shorter. A value's kind is a 4-bit code the
// containing format stores where it likes.
//
// The decoding is also written in SQL (migrations/sql/0004_packed_values):
// a change here is a change of the stored format.
//
// Thread-safety: pure functions.
#ifndef METRICS_STORAGE_FORMAT_VALUE_CODEC_H_
#define METRICS_STORAGE_FORMAT_VALUE_CODEC_H_

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "absl/strings/string_view.h"

namespace metrics::storage {

// Kinds 0..kMaxDecimals: m / 10^kind; 8 + k: -(m / 10^k); kRawDouble: the
// value's 8 bytes, little-endian; kPowerOfTwo: a varint of m << 6 | k,
// value m * 2^k.
inline constexpr int kMaxDecimals = 6;
// 10^k for k places.
inline constexpr double kPowersOfTen[kMaxDecimals + 1] = {1,   10,  100, 1000,
                                                          1e4, 1e5, 1e6};
// Digits at or above this (2^53) are not all exact in a double.
inline constexpr double kExactDigits = 9007199254740992.0;

// A double's bits, and back: values are compared and stored bit for bit.
inline uint64_t BitsOfDouble(double value) {
  uint64_t bits;
  std::memcpy(&bits, &value, sizeof bits);
  return bits;
}
inline double DoubleOfBits(uint64_t bits) {
  double value;
  std::memcpy(&value, &bits, sizeof value);
  return value;
}
inline constexpr uint8_t kRawDouble = 7;
inline constexpr uint8_t kPowerOfTwo = 15;

struct EncodedValue {
  uint8_t kind = kRawDouble;
  uint64_t digits = 0;  // m, or the raw double's bits
};

EncodedValue EncodeValue(double value);

// Room WriteVarint and WriteValuePayload need at most.
inline constexpr size_t kMaxVarintBytes = 10;
inline constexpr size_t kMaxPayloadBytes = kMaxVarintBytes;

// Writes the payload of `v` (its varint or 8 bytes; the kind is the
// caller's to store) at `out`, which has room for kMaxPayloadBytes; returns
// the end of what it wrote. Writers take a pointer, not a std::string: on
// the hot paths (a report's values, a rollup's stats) an append per field
// cost more than the encoding.
char* WriteValuePayload(char* out, const EncodedValue& v);
// Reads a payload of `kind` from the front of `in`; false when `in` is too
// short or the kind is not one of the above.
bool ReadValuePayload(absl::string_view& in, uint8_t kind, double& value);

// Writes `value` at `out`, which has room for kMaxVarintBytes; returns the
// end.
char* WriteVarint(char* out, uint64_t value);
// False when `in` ends inside the varint or it has more than 64 bits.
bool ReadVarint(absl::string_view& in, uint64_t& value);

}  // namespace metrics::storage

#endif  // METRICS_STORAGE_FORMAT_VALUE_CODEC_H_
