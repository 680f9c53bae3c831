#include "storage/format/packed_report.h"

#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace metrics::storage {
namespace {

using ::metrics::test_util::StatusIs;

TEST(PackedReportTest, RoundTripsAnAgentsReportInAFewBytesAValue) {
  // Registry ids as ingest gives them: a run of consecutive ids.
  std::vector<SeriesValue> values = {
      {100001, 52.34919921875}, {100002, 1484783566848}, {100003, 181.2},
      {100004, 0.0},            {100005, -1.5},          {100006, 2100}};
  for (int g = 0; g < 8; ++g) {
    values.emplace_back(100007 + 2 * g, 71 + g);
    values.emplace_back(100008 + 2 * g, 21474836480.0 + g * 2097152);
  }
  const std::string packed = PackReport(values);
  ASSERT_OK_AND_ASSIGN(std::vector<SeriesValue> back, UnpackReport(packed));
  EXPECT_EQ(back, values);
  // 22 values in 4 + 8 + 6 + 2 + 2 + 1 + 3 + 8 * (2 + 6) bytes and a version.
  EXPECT_LE(packed.size(), 100u);
}

TEST(PackedReportTest, FormatTwoIsFormatOneMarkedAsNotYetInTheRollups) {
  const std::vector<SeriesValue> values = {{5, 1.0 / 3}, {9, 2}, {10, -7}};
  const std::string in_rollups = PackReport(values);
  const std::string pending = PackReport(values, RollupState::kPending);
  EXPECT_FALSE(IsPendingReport(in_rollups));
  EXPECT_TRUE(IsPendingReport(pending));
  EXPECT_EQ(pending.substr(1), in_rollups.substr(1));
  ASSERT_OK_AND_ASSIGN(std::vector<SeriesValue> back, UnpackReport(pending));
  EXPECT_EQ(back, values);
  EXPECT_FALSE(IsPendingReport(""));
}

TEST(PackedReportTest, GarbageIsDataLossNamingTheFormat) {
  EXPECT_THAT(UnpackReport(""), StatusIs(absl::StatusCode::kDataLoss));
  EXPECT_THAT(UnpackReport("\x03"), StatusIs(absl::StatusCode::kDataLoss));
  const std::string packed = PackReport({{5, 1.0 / 3}, {9, 2}});
  for (size_t cut = 2; cut < packed.size(); ++cut) {
    if (cut == packed.size() - 2) continue;  // ends after the first value
    EXPECT_THAT(UnpackReport(packed.substr(0, cut)),
                StatusIs(absl::StatusCode::kDataLoss,
                         testing::HasSubstr("not in format 1 or 2")))
        << cut;
  }
  // A zero id step would repeat a series.
  EXPECT_THAT(UnpackReport(std::string("\x01\x50\x01\x00\x01", 5)),
              StatusIs(absl::StatusCode::kDataLoss));
  // A raw double cut short.
  EXPECT_THAT(UnpackReport(std::string("\x01\x17\x01", 3)),
              StatusIs(absl::StatusCode::kDataLoss));
}

}  // namespace
}  // namespace metrics::storage
