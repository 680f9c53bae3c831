#include "client/proc_stats.h"

#include <fstream>
#include <sstream>
#include <string>

#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace metrics::client {
namespace {

using ::metrics::test_util::StatusIs;
using ::testing::HasSubstr;
using ::testing::UnorderedElementsAre;

std::string Fixture(const std::string& name) {
  std::ifstream file(std::string(TESTDATA_DIR) + "/" + name);
  std::ostringstream text;
  text << file.rdbuf();
  return text.str();
}

template <typename Map>
std::vector<std::string> Keys(const Map& map) {
  std::vector<std::string> keys;
  for (const auto& [k, v] : map) keys.push_back(k);
  return keys;
}

TEST(ProcStatsTest, CpuLineSumsBusyAndTotalJiffies) {
  ASSERT_OK_AND_ASSIGN(CpuTimes t, ParseProcStat(Fixture("t0/stat")));
  // user nice system idle iowait irq softirq steal = 1000 10 500 8000 100 0 50 0
  EXPECT_EQ(t.total, 9660u);
  EXPECT_EQ(t.busy, 9660u - 8000 - 100);
}

TEST(ProcStatsTest, CpuLineMissingOrShortIsAnError) {
  EXPECT_THAT(ParseProcStat("cpu0 1 2 3 4 5 6 7 8\n"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("no \"cpu\" line")));
  EXPECT_THAT(ParseProcStat("cpu  1 2 3\n"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("expected at least 8")));
  EXPECT_THAT(ParseProcStat("cpu  1 2 x 4 5 6 7 8\n"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("field 3 is not a number")));
}

TEST(ProcStatsTest, MemAvailableInBytes) {
  ASSERT_OK_AND_ASSIGN(int64_t bytes,
                       ParseMemAvailableBytes(Fixture("t0/meminfo")));
  EXPECT_EQ(bytes, 12345678LL * 1024);
  EXPECT_THAT(ParseMemAvailableBytes("MemTotal: 1 kB\n"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("no MemAvailable")));
  EXPECT_THAT(ParseMemAvailableBytes("MemAvailable: 12 MB\n"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("MemAvailable")));
}

// A count whose bytes do not fit in int64_t is refused, not overflowed (the
// proc_stats fuzzer's find).
TEST(ProcStatsTest, KibibytesThatOverflowAreRefused) {
  int64_t bytes = 0;
  ASSERT_TRUE(KibibytesToBytes("9007199254740991", &bytes));
  EXPECT_EQ(bytes, 9007199254740991LL * 1024);
  EXPECT_FALSE(KibibytesToBytes("9007199254740992", &bytes));
  EXPECT_FALSE(KibibytesToBytes("-1", &bytes));
  EXPECT_FALSE(KibibytesToBytes("555555555532768000", &bytes));
  EXPECT_THAT(ParseMemAvailableBytes("MemAvailable: 555555555532768000 kB\n"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("MemAvailable")));
}

TEST(ProcStatsTest, DiskStatsKeepWholeDisksOnly) {
  ASSERT_OK_AND_ASSIGN(auto disks, ParseDiskStats(Fixture("t0/diskstats")));
  // Not loop0, zram0, dm-0, md0 (virtual) nor sda1, nvme0n1p1, mmcblk0p1
  // (partitions).
  EXPECT_THAT(Keys(disks),
              UnorderedElementsAre("sda", "nvme0n1", "mmcblk0", "sdb"));
  const DiskCounters& sda = disks.at("sda");
  EXPECT_EQ(sda.reads, 1000u);
  EXPECT_EQ(sda.read_sectors, 20000u);
  EXPECT_EQ(sda.writes, 2000u);
  EXPECT_EQ(sda.write_sectors, 40000u);
}

TEST(ProcStatsTest, DiskStatsBadLineIsNamed) {
  EXPECT_THAT(ParseDiskStats("   8 0 sda 1 2 3\n"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("/proc/diskstats line 1")));
}

TEST(ProcStatsTest, NetDevLeavesOutLoopback) {
  ASSERT_OK_AND_ASSIGN(auto interfaces, ParseNetDev(Fixture("t0/net/dev")));
  EXPECT_THAT(Keys(interfaces), UnorderedElementsAre("eth0", "eth1", "docker0"));
  EXPECT_EQ(interfaces.at("eth0").received_bytes, 1000000u);
  EXPECT_EQ(interfaces.at("eth0").sent_bytes, 500000u);
  EXPECT_THAT(ParseNetDev("h\nh\n eth0: 1 2 3\n"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("/proc/net/dev line 3")));
}

TEST(ProcStatsTest, CounterDeltaHandlesWrapAndReset) {
  EXPECT_EQ(CounterDelta(100, 250), 150u);
  // A 32-bit counter wrapped: 4294967000 -> 2^32 - 1 -> 0 -> 100.
  EXPECT_EQ(CounterDelta(4294967000u, 100), 396u);
  // A counter above 32 bits went down: reset, growth unknown.
  EXPECT_EQ(CounterDelta(uint64_t{1} << 40, 5), std::nullopt);
}

}  // namespace
}  // namespace metrics::client
