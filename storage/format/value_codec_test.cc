#include "storage/format/value_codec.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>

#include "gtest/gtest.h"

namespace metrics::storage {
namespace {

uint64_t Bits(double v) {
  uint64_t b;
  std::memcpy(&b, &v, sizeof b);
  return b;
}

// Encodes and decodes `v`; returns the payload's size.
size_t RoundTrip(double v) {
  const EncodedValue e = EncodeValue(v);
  char buffer[kMaxPayloadBytes];
  const std::string bytes(buffer, WriteValuePayload(buffer, e));
  absl::string_view in = bytes;
  double back = 0;
  EXPECT_TRUE(ReadValuePayload(in, e.kind, back)) << v;
  EXPECT_TRUE(in.empty()) << v;
  EXPECT_EQ(Bits(back), Bits(v)) << v << " came back as " << back;
  return bytes.size();
}

TEST(ValueCodecTest, WhatAgentsReportTakesAFewBytes) {
  EXPECT_EQ(RoundTrip(97), 1u);            // GPU utilisation
  EXPECT_EQ(RoundTrip(2100), 2u);          // clock, MHz
  EXPECT_EQ(RoundTrip(6.25), 2u);          // load average
  EXPECT_EQ(RoundTrip(37.2), 2u);          // a percentage to one place
  EXPECT_EQ(RoundTrip(-3.5), 1u);          // negative: the sign is the kind's
  EXPECT_EQ(RoundTrip(16106127360), 2u);   // bytes: 15 GiB is 15 * 2^30
  EXPECT_EQ(RoundTrip(1484783566848), 5u);  // bytes in pages of 4 KiB
  EXPECT_EQ(RoundTrip(1484783566849), 6u);  // bytes
  EXPECT_EQ(EncodeValue(16106127360).kind, kPowerOfTwo);
  EXPECT_EQ(EncodeValue(37.2).kind, 1);
  EXPECT_EQ(EncodeValue(-3.5).kind, 9);
}

TEST(ValueCodecTest, AnyOtherDoubleIsItsEightBytes) {
  for (double v : {1.0 / 3, 0.1 + 0.2, 1e300, 5e-324, 1.2345678, -0.0,
                   std::numeric_limits<double>::infinity(),
                   std::numeric_limits<double>::max(), 9007199254740993.0 * 4}) {
    const size_t size = RoundTrip(v);
    if (v != 0) {
      EXPECT_EQ(EncodeValue(v).kind, kRawDouble) << v;
      EXPECT_EQ(size, 8u) << v;
    }
  }
  // NaN keeps its bits.
  const double nan = std::numeric_limits<double>::quiet_NaN();
  EXPECT_EQ(RoundTrip(nan), 8u);
}

TEST(ValueCodecTest, EveryDoubleComesBackBitForBit) {
  std::mt19937_64 random(7);
  for (int i = 0; i < 200000; ++i) {
    double v;
    switch (i % 4) {
      case 0: {  // any bits but NaN's
        const uint64_t bits = random();
        std::memcpy(&v, &bits, sizeof v);
        if (std::isnan(v)) continue;
        break;
      }
      case 1:  // decimals of up to 8 places, some beyond what is packed
        v = static_cast<double>(static_cast<int64_t>(random() % 2000000001) -
                                1000000000) /
            std::pow(10, random() % 9);
        break;
      case 2:  // large integers near the limit of exact doubles
        v = static_cast<double>(random() >> (random() % 20));
        break;
      default:  // a rate: an integer over a measured interval
        v = std::round(static_cast<double>(random() % 100000000)) /
            (1 + static_cast<double>(random() % 1000) / 1e5);
    }
    RoundTrip(v);
  }
}

// The decimal form as the header defines it, found the slow way: the fewest
// places whose digits read back as the same bits.
int FewestPlaces(double v) {
  for (int k = 0; k <= kMaxDecimals; ++k) {
    const double scaled = std::fabs(v) * std::pow(10.0, k);
    if (!(scaled < 9007199254740992.0)) return -1;
    const double back = std::nearbyint(scaled) / std::pow(10.0, k);
    if (Bits(std::signbit(v) ? -back : back) == Bits(v)) return k;
  }
  return -1;
}

TEST(ValueCodecTest, EveryDecimalIsWrittenWithItsFewestPlaces) {
  std::mt19937_64 random(11);
  for (int i = 0; i < 300000; ++i) {
    double v;
    if (i % 3 == 0) {  // a decimal of 0..8 places, of any size
      v = static_cast<double>(random() >> (random() % 64)) /
          std::pow(10, random() % 9);
    } else if (i % 3 == 1) {  // a sum of decimals, as rollups keep
      v = 0;
      for (int n = 0; n < 10; ++n) v += static_cast<double>(random() % 10000) / 100;
    } else {  // near the limit of exact digits
      v = static_cast<double>((uint64_t{1} << 52) + random() % (uint64_t{1} << 52)) /
          std::pow(10, random() % 7);
    }
    if (random() % 2) v = -v;
    const int places = FewestPlaces(v);
    const EncodedValue e = EncodeValue(v);
    if (places < 0) {
      EXPECT_EQ(e.kind, kRawDouble) << v;
    } else if (e.kind != kPowerOfTwo) {
      EXPECT_EQ(e.kind, (std::signbit(v) ? 8 : 0) + places) << v;
    } else {
      EXPECT_EQ(places, 0) << v;
    }
  }
}

TEST(ValueCodecTest, CutOrUnknownPayloadsAreRefused) {
  double v;
  absl::string_view empty;
  EXPECT_FALSE(ReadValuePayload(empty, 0, v));
  absl::string_view short_raw("1234567", 7);
  EXPECT_FALSE(ReadValuePayload(short_raw, kRawDouble, v));
  absl::string_view cut_power("\x80", 1);
  EXPECT_FALSE(ReadValuePayload(cut_power, kPowerOfTwo, v));
  absl::string_view cut("\x80\x80", 2);
  EXPECT_FALSE(ReadValuePayload(cut, 0, v));
  // 11 bytes of continuation: more than 64 bits.
  const std::string long_varint(10, '\xff');
  absl::string_view too_long = long_varint;
  uint64_t n;
  EXPECT_FALSE(ReadVarint(too_long, n));
  char buffer[kMaxVarintBytes];
  const std::string max(buffer, WriteVarint(buffer, UINT64_MAX));
  absl::string_view in = max;
  ASSERT_TRUE(ReadVarint(in, n));
  EXPECT_EQ(n, UINT64_MAX);
}

}  // namespace
}  // namespace metrics::storage
