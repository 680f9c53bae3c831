#include "client/system_sampler.h"

#include <filesystem>
#include <map>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace metrics::client {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Key;
using ::testing::UnorderedElementsAre;
using SteadyClock = std::chrono::steady_clock;

// A proc directory whose files the test swaps between recorded snapshots.
class FakeProc {
 public:
  FakeProc()
      : root_(fs::temp_directory_path() /
              absl::StrCat("fake_proc_", getpid(), "_", counter_++)) {
    fs::create_directories(root_ / "net");
  }
  ~FakeProc() { fs::remove_all(root_); }
  void Load(const std::string& snapshot) {
    fs::copy(fs::path(TESTDATA_DIR) / snapshot, root_,
             fs::copy_options::recursive | fs::copy_options::overwrite_existing);
  }
  std::string root() const { return root_.string(); }

 private:
  static inline int counter_ = 0;
  fs::path root_;
};

// (name, gpu) -> value of one sample.
std::map<std::pair<std::string, std::string>, double> Values(const Sample& s) {
  std::map<std::pair<std::string, std::string>, double> values;
  for (const Measurement& m : s.measurements) {
    values[{std::string(m.name), std::string(m.gpu_uuid)}] = m.value;
  }
  return values;
}

TEST(SystemSamplerTest, RatesFromTwoRecordedSnapshots) {
  FakeProc proc;
  proc.Load("t0");
  SamplerOptions options;
  options.proc_root = proc.root();
  const SteadyClock::time_point start = SteadyClock::now();
  ASSERT_OK_AND_ASSIGN(auto sampler,
                       SystemSampler::Create(std::move(options), start));
  proc.Load("t1");
  const Sample sample = sampler->Take(start + std::chrono::seconds(2));
  EXPECT_THAT(sample.errors, IsEmpty());
  auto v = Values(sample);
  // Busy 600 + 150 + 50 of 2000 jiffies.
  EXPECT_DOUBLE_EQ((v[{"cpu_util_simple", ""}]), 40.0);
  EXPECT_DOUBLE_EQ((v[{"memory_free", ""}]), 12000000.0 * 1024);
  // sda: 100 reads, 300 writes; nvme0n1: 396 reads across a 32-bit wrap,
  // 100 writes. sdb vanished and sdc appeared: neither counts. Partitions
  // (sda1, nvme0n1p1) and dm-0, loop0 do not count twice.
  EXPECT_DOUBLE_EQ((v[{"disk_iops", ""}]), (100 + 300 + 396 + 100) / 2.0);
  EXPECT_DOUBLE_EQ((v[{"disk_throughput_read", ""}]),
                   (2048 + 2048) * 512 / 2.0);
  EXPECT_DOUBLE_EQ((v[{"disk_throughput_write", ""}]),
                   (4096 + 1048) * 512 / 2.0);
  // eth0: +2000000 received, +400000 sent; eth1 received 1000 across a
  // 32-bit wrap; docker0 vanished and wlan0 appeared; lo never counts.
  EXPECT_DOUBLE_EQ((v[{"net_throughput_recv", ""}]), (2000000 + 1000) / 2.0);
  EXPECT_DOUBLE_EQ((v[{"net_throughput_sent", ""}]), 400000 / 2.0);
  EXPECT_EQ(v.size(), 7u);  // no GPU series without NVML

  // The appeared devices count from the next sample on.
  const Sample again = sampler->Take(start + std::chrono::seconds(4));
  auto w = Values(again);
  EXPECT_DOUBLE_EQ((w[{"disk_iops", ""}]), 0.0);
  EXPECT_DOUBLE_EQ((w[{"net_throughput_recv", ""}]), 0.0);
}

TEST(SystemSamplerTest, MissingSourceIsReportedAndOthersStillMeasured) {
  FakeProc proc;
  proc.Load("t0");
  SamplerOptions options;
  options.proc_root = proc.root();
  const SteadyClock::time_point start = SteadyClock::now();
  ASSERT_OK_AND_ASSIGN(auto sampler,
                       SystemSampler::Create(std::move(options), start));
  proc.Load("t1");
  fs::remove(fs::path(proc.root()) / "diskstats");
  const Sample sample = sampler->Take(start + std::chrono::seconds(1));
  ASSERT_EQ(sample.errors.size(), 1u);
  EXPECT_THAT(std::string(sample.errors[0].message()), HasSubstr("diskstats"));
  auto v = Values(sample);
  EXPECT_EQ(v.count({"disk_iops", ""}), 0u);
  EXPECT_EQ(v.count({"cpu_util_simple", ""}), 1u);
  EXPECT_EQ(v.count({"net_throughput_sent", ""}), 1u);
}

TEST(SystemSamplerTest, NoProcAtAllFailsCreate) {
  SamplerOptions options;
  options.proc_root = "/nonexistent/proc";
  EXPECT_THAT(SystemSampler::Create(std::move(options), SteadyClock::now()),
              metrics::test_util::StatusIs(absl::StatusCode::kFailedPrecondition,
                                         HasSubstr("/nonexistent/proc")));
}

TEST(SystemSamplerTest, ReportsEachGpuOfTheFakeNvml) {
  FakeProc proc;
  proc.Load("t0");
  SamplerOptions options;
  options.proc_root = proc.root();
  ASSERT_OK_AND_ASSIGN(options.nvml, Nvml::Load(FAKE_NVML_PATH));
  const SteadyClock::time_point start = SteadyClock::now();
  ASSERT_OK_AND_ASSIGN(auto sampler,
                       SystemSampler::Create(std::move(options), start));
  EXPECT_EQ(sampler->gpu_count(), 2);
  auto v = Values(sampler->Take(start + std::chrono::seconds(1)));
  const std::string gpu0 = "GPU-00000000-0000-0000-0000-000000000000";
  const std::string gpu1 = "GPU-00000000-0000-0000-0000-000000000001";
  EXPECT_EQ((v[{"gpu_util", gpu0}]), 10);
  EXPECT_EQ((v[{"gpu_util", gpu1}]), 30);
  EXPECT_EQ((v[{"gpu_free_memory", gpu1}]), double(uint64_t{2} << 30));
  EXPECT_EQ((v[{"gpu_memory_used", gpu1}]), double(uint64_t{14} << 30));
  EXPECT_EQ((v[{"gpu_power", gpu1}]), 110);
  EXPECT_EQ((v[{"gpu_sm_clock", gpu0}]), 1.4e9);
  // The host without CPU (no jiffies passed in the fixture), 15 per GPU.
  EXPECT_EQ(v.size(), 6u + 2 * 15);
}

TEST(SystemSamplerTest, AnUnsupportedSignalIsSaidOnceAndLeftOut) {
  FakeProc proc;
  proc.Load("t0");
  SamplerOptions options;
  options.proc_root = proc.root();
  setenv("FAKE_NVML_UNSUPPORTED", "nvmlDeviceGetPowerUsage", 1);
  ASSERT_OK_AND_ASSIGN(options.nvml, Nvml::Load(FAKE_NVML_PATH));
  const SteadyClock::time_point start = SteadyClock::now();
  ASSERT_OK_AND_ASSIGN(auto sampler,
                       SystemSampler::Create(std::move(options), start));
  const Sample first = sampler->Take(start + std::chrono::seconds(1));
  const Sample second = sampler->Take(start + std::chrono::seconds(2));
  unsetenv("FAKE_NVML_UNSUPPORTED");
  ASSERT_EQ(first.errors.size(), 2u);  // one per GPU, the first time only
  EXPECT_THAT(std::string(first.errors[0].message()),
              HasSubstr("gpu_power is not supported (nvmlDeviceGetPowerUsage"));
  EXPECT_THAT(second.errors, IsEmpty());
  auto v = Values(second);
  EXPECT_EQ(v.count({"gpu_power", "GPU-00000000-0000-0000-0000-000000000000"}), 0u);
  EXPECT_EQ((v[{"gpu_power_limit", "GPU-00000000-0000-0000-0000-000000000000"}]), 300);
}

}  // namespace
}  // namespace metrics::client
