// Sealed windows give back every report bit for bit (the special doubles,
// sparse series, repeated and shuffled values), cost a few bytes a value on
// smooth data, and refuse bytes that are not a window.
#include "storage/format/sealed_window.h"

#include <climits>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>

#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace metrics::storage {
namespace {

using ::metrics::test_util::StatusIs;

double FromBits(uint64_t u) {
  double v;
  std::memcpy(&v, &u, sizeof v);
  return v;
}

void ExpectRoundTrip(const std::vector<WindowReport>& reports) {
  const std::string sealed = SealWindow(reports);
  ASSERT_OK_AND_ASSIGN(std::vector<WindowReport> back, UnsealWindow(sealed));
  ASSERT_EQ(back.size(), reports.size());
  for (size_t i = 0; i < reports.size(); ++i) {
    EXPECT_TRUE(back[i] == reports[i]) << "report " << i;
  }
}

TEST(SealedWindowTest, AnEmptyWindowAndOneReport) {
  ExpectRoundTrip({});
  ExpectRoundTrip({{1763800000412345, {{1, 37.5}, {7, -2}}}});
  ExpectRoundTrip({{-5, {}}});  // before 1970, no values
}

TEST(SealedWindowTest, TheReportCountAndFirstTimeAreReadFromTheFirstBytes) {
  std::vector<WindowReport> reports;
  for (int i = 0; i < 300; ++i) reports.push_back({1763800000000000 + i * 1000, {{1, i * 0.5}}});
  const std::string sealed = SealWindow(reports);
  ASSERT_OK_AND_ASSIGN(int64_t count, SealedReportCount(sealed.substr(0, 11)));
  EXPECT_EQ(count, 300);
  ASSERT_OK_AND_ASSIGN(int64_t none, SealedReportCount(SealWindow({})));
  EXPECT_EQ(none, 0);
  EXPECT_THAT(SealedReportCount(""), StatusIs(absl::StatusCode::kDataLoss));
  EXPECT_THAT(SealedReportCount("\x07\x01"), StatusIs(absl::StatusCode::kDataLoss));
  // The first time too, the earliest (a time before the epoch as well).
  ASSERT_OK_AND_ASSIGN(int64_t first, SealedFirstTime(sealed.substr(0, kSealedHeadBytes)));
  EXPECT_EQ(first, 1763800000000000);
  ASSERT_OK_AND_ASSIGN(int64_t before_epoch,
                       SealedFirstTime(SealWindow({{-62135596800000000, {{1, 1.0}}}})));
  EXPECT_EQ(before_epoch, -62135596800000000);
  EXPECT_THAT(SealedFirstTime(SealWindow({})), StatusIs(absl::StatusCode::kDataLoss));
  EXPECT_THAT(SealedFirstTime(sealed.substr(0, 4)), StatusIs(absl::StatusCode::kDataLoss));
}

TEST(SealedWindowTest, EveryDoubleComesBackBitForBit) {
  const double specials[] = {0.0,
                             -0.0,
                             std::numeric_limits<double>::infinity(),
                             -std::numeric_limits<double>::infinity(),
                             std::numeric_limits<double>::quiet_NaN(),
                             FromBits(0x7ff0000000000123),  // a NaN with a payload
                             std::numeric_limits<double>::denorm_min(),
                             std::numeric_limits<double>::max(),
                             -std::numeric_limits<double>::lowest(),
                             1.0 / 3,
                             0.1,
                             9007199254740993.0,
                             16106127360,
                             -12.75};
  std::vector<WindowReport> reports;
  std::mt19937_64 random(3);
  for (int i = 0; i < 300; ++i) {
    WindowReport r{1763800000000000 + i * 1000000 + static_cast<int64_t>(random() % 3000), {}};
    r.values.emplace_back(1, specials[i % std::size(specials)]);
    r.values.emplace_back(2, FromBits(random()));  // any bit pattern at all
    r.values.emplace_back(3, 42);                  // a constant
    r.values.emplace_back(4, std::round(70 + 20 * std::sin(i / 50.0)));
    reports.push_back(std::move(r));
  }
  ExpectRoundTrip(reports);
}

TEST(SealedWindowTest, SparseSeriesAndUnevenTimesComeBackInPlace) {
  std::vector<WindowReport> reports;
  for (int i = 0; i < 100; ++i) {
    WindowReport r{1763800000000000 + i * i * 1000 - (i % 7) * 13, {}};
    if (i % 3 == 0) r.values.emplace_back(5, i * 0.25);
    r.values.emplace_back(9, 1000.0 - i);
    if (i == 99) r.values.emplace_back(1234567890123, 1);  // a series seen once
    reports.push_back(std::move(r));
  }
  reports.push_back({reports.back().time_us, {{9, 1}}});  // the same time twice
  ExpectRoundTrip(reports);
}

TEST(SealedWindowTest, TrainingBatchIndexesComeBackWithTheirReports) {
  // Readings of the legacy API carry a batch index; some reports have none.
  std::vector<WindowReport> reports;
  for (int i = 0; i < 40; ++i) {
    WindowReport r{1763800000000000 + i * 250000, {{3, i * 1.5}}};
    if (i % 4 != 3) r.batch = i == 0 ? INT32_MIN : i == 1 ? INT32_MAX : 100 + i / 2;
    reports.push_back(std::move(r));
  }
  reports.push_back({reports.back().time_us, {}, 0});  // a batch index, no values
  ExpectRoundTrip(reports);
  // The batch column is no series: a window without batches has none.
  ASSERT_OK_AND_ASSIGN(std::vector<WindowReport> back,
                       UnsealWindow(SealWindow({{5, {{1, 2.0}}}})));
  EXPECT_FALSE(back[0].batch.has_value());
}

TEST(SealedWindowTest, SmoothSeriesCostAFewBytesAValue) {
  // Ten minutes of an agent: integer utilisations, page-rounded bytes and a
  // two-decimal load average, a report a second with jitter.
  std::mt19937_64 random(5);
  std::uniform_real_distribution<double> noise(-1, 1);
  std::vector<WindowReport> reports;
  for (int i = 0; i < 600; ++i) {
    WindowReport r{1763800000412345 + i * 1000000 + static_cast<int64_t>(random() % 3000), {}};
    for (int g = 0; g < 8; ++g) {
      r.values.emplace_back(2 * g + 1, std::round(70 + 15 * noise(random)));
      r.values.emplace_back(2 * g + 2,
                            std::round((20 + g + noise(random)) * 512) * (2 << 20));
    }
    r.values.emplace_back(17, std::round((6 + noise(random)) * 100) / 100);
    reports.push_back(std::move(r));
  }
  const std::string sealed = SealWindow(reports);
  const double per_value = static_cast<double>(sealed.size()) / (600 * 17);
  EXPECT_LT(per_value, 2.0) << sealed.size() << " bytes";
  ExpectRoundTrip(reports);
}

TEST(SealedWindowTest, BytesThatAreNoWindowAreRefused) {
  std::vector<WindowReport> reports;
  for (int i = 0; i < 50; ++i) {
    reports.push_back({i * 1000000, {{1, i * 0.5}, {2, 1.0 / (i + 1)}}});
  }
  const std::string sealed = SealWindow(reports);
  EXPECT_THAT(UnsealWindow(""), StatusIs(absl::StatusCode::kDataLoss));
  EXPECT_THAT(UnsealWindow(std::string(1, '\x02') + sealed.substr(1)),
              StatusIs(absl::StatusCode::kDataLoss));
  // Every cut short, and one byte more, is refused (never read past the end).
  for (size_t n = 0; n < sealed.size(); ++n) {
    EXPECT_FALSE(UnsealWindow(sealed.substr(0, n)).ok()) << n;
  }
  EXPECT_THAT(UnsealWindow(sealed + "x"), StatusIs(absl::StatusCode::kDataLoss));
  // Any byte changed decodes or is refused, never crashes.
  for (size_t i = 0; i < sealed.size(); ++i) {
    std::string changed = sealed;
    changed[i] = static_cast<char>(changed[i] ^ 0x5a);
    (void)UnsealWindow(changed);
  }
}

}  // namespace
}  // namespace metrics::storage
