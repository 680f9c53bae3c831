// The CSV form of exports: the line format, RFC 4180 quoting, values that
// read back bit for bit, and chunks that stop when the reader is gone.
#include "query/csv_export.h"

#include <cstdlib>
#include <cstring>
#include <limits>
#include <random>

#include "absl/strings/str_split.h"
#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace metrics::query {
namespace {

using ::metrics::test_util::StatusIs;
using ::testing::ElementsAre;

storage::SeriesInfo Info(std::string agent, std::string name, std::string gpu,
                         std::string unit) {
  storage::SeriesInfo s;
  s.agent_id = std::move(agent);
  s.name = std::move(name);
  s.gpu_uuid = std::move(gpu);
  s.unit = std::move(unit);
  return s;
}

TEST(CsvExportTest, LinesHoldTimeSeriesAndValue) {
  std::vector<storage::SeriesInfo> series = {
      Info("node-1", "cpu_util_simple", "", "percent"),
      Info("node,\"2\"", "gpu_util", "GPU-5f3c", "percent")};
  series[1].gpu_index = 3;
  std::string out;
  CsvExportWriter writer(series, false, 1 << 16, [&](std::string chunk) {
    out += chunk;
    return absl::OkStatus();
  });
  // 2026-11-28T01:02:03.000004Z and .5 s later.
  const int64_t t = int64_t{1795827723} * 1000000 + 4;
  ASSERT_OK(writer.Take(0, {t, 12.5}));
  ASSERT_OK(writer.Take(1, {t + 500000, 0.1}));
  ASSERT_OK(writer.Take(1, {t + 1000000, -0.0}));
  ASSERT_OK(writer.Finish());
  EXPECT_EQ(writer.lines(), 3);
  EXPECT_THAT(absl::StrSplit(out, '\n'),
              ElementsAre("time,agent_id,gpu_index,gpu_uuid,name,unit,value",
                          "2026-11-28T01:02:03.000004Z,node-1,,,cpu_util_simple,percent,12.5",
                          "2026-11-28T01:02:03.500004Z,\"node,\"\"2\"\"\",3,GPU-5f3c,gpu_util,"
                          "percent,0.1",
                          "2026-11-28T01:02:04.000004Z,\"node,\"\"2\"\"\",3,GPU-5f3c,gpu_util,"
                          "percent,-0",
                          ""));
}

TEST(CsvExportTest, RollupBucketsStandingInForExpiredSamplesSaySo) {
  const std::vector<storage::SeriesInfo> series = {Info("n", "gpu_util", "GPU-1", "percent")};
  std::string out;
  CsvExportWriter writer(series, true, 1 << 16, [&](std::string chunk) {
    out += chunk;
    return absl::OkStatus();
  });
  const int64_t t = int64_t{1795827720} * 1000000;
  storage::RollupStats stats;
  stats.Add(t + 1, 1.0);
  stats.Add(t + 2, 100.0);
  stats.Add(t + 3, 4.0);
  ASSERT_OK(writer.TakeBucket(0, t, 10, stats));
  ASSERT_OK(writer.Take(0, {t + 10000000, 7.5}));
  ASSERT_OK(writer.Finish());
  EXPECT_THAT(absl::StrSplit(out, '\n'),
              ElementsAre("time,agent_id,gpu_index,gpu_uuid,name,unit,value,bucket_seconds,"
                          "min,max,count",
                          "2026-11-28T01:02:00.000000Z,n,0,GPU-1,gpu_util,percent,35,10,1,100,3",
                          "2026-11-28T01:02:10.000000Z,n,0,GPU-1,gpu_util,percent,7.5,,,,",
                          ""));
}

TEST(CsvExportTest, ValuesReadBackBitForBit) {
  std::mt19937_64 bits(42);
  std::vector<double> values = {0.1,     1.0 / 3,  1e-300, 5e-324, 1.7976931348623157e308,
                                -2.5e-7, 123456789.123456789, 0.0};
  for (int i = 0; i < 100000; ++i) {
    const uint64_t b = bits();
    double v;
    std::memcpy(&v, &b, sizeof v);
    if (std::isfinite(v)) values.push_back(v);
  }
  for (double v : values) {
    std::string text;
    AppendRoundTripDouble(text, v);
    const double back = std::strtod(text.c_str(), nullptr);
    ASSERT_EQ(std::memcmp(&back, &v, sizeof v), 0) << text;
  }
  std::string special;
  AppendRoundTripDouble(special, std::numeric_limits<double>::quiet_NaN());
  special += ' ';
  AppendRoundTripDouble(special, -std::numeric_limits<double>::infinity());
  EXPECT_EQ(special, "nan -inf");
}

TEST(CsvExportTest, ChunksAreHandedOnAndAFailedReaderStopsTheWriter) {
  const std::vector<storage::SeriesInfo> series = {Info("a", "x", "", "1")};
  std::vector<std::string> chunks;
  CsvExportWriter writer(series, false, 100, [&](std::string chunk) {
    chunks.push_back(std::move(chunk));
    return chunks.size() < 3 ? absl::OkStatus() : absl::CancelledError("the client left");
  });
  absl::Status status;
  int taken = 0;
  for (; taken < 1000 && status.ok(); ++taken) {
    status = writer.Take(0, {int64_t{1795827723} * 1000000 + taken, 1.0 * taken});
  }
  EXPECT_THAT(status, StatusIs(absl::StatusCode::kCancelled));
  EXPECT_EQ(chunks.size(), 3u);
  EXPECT_EQ(chunks[0].rfind(CsvExportWriter::Header(false), 0), 0u);
  for (const std::string& c : chunks) {
    EXPECT_GE(c.size(), 100u);
    EXPECT_LT(c.size(), 200u);  // whole lines, about chunk_bytes each
    EXPECT_EQ(c.back(), '\n');
  }
  EXPECT_EQ(CsvField(" padded"), "\" padded\"");
  EXPECT_EQ(CsvField("line\nbreak"), "\"line\nbreak\"");
  EXPECT_EQ(CsvField("plain"), "plain");
}

}  // namespace
}  // namespace metrics::query
