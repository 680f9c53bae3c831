#include "client/system_sampler.h"

#include <filesystem>
#include <map>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/testing/json_file.h"
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

// client/testdata/host_readings.json, which the Python profiler's tests
// read too: the rates between two snapshots, and why each is what it is.
TEST(SystemSamplerTest, RatesFromTwoRecordedSnapshots) {
  const boost::json::value readings = test_util::ReadJsonFile(TESTDATA_DIR "/host_readings.json");
  ASSERT_FALSE(readings.is_null());
  FakeProc proc;
  proc.Load(std::string(readings.at("first").as_string()));
  SamplerOptions options;
  options.proc_root = proc.root();
  const SteadyClock::time_point start = SteadyClock::now();
  ASSERT_OK_AND_ASSIGN(auto sampler,
                       SystemSampler::Create(std::move(options), start));
  proc.Load(std::string(readings.at("then").as_string()));
  const auto after = std::chrono::seconds(readings.at("after_s").as_int64());
  const Sample sample = sampler->Take(start + after);
  EXPECT_THAT(sample.errors, IsEmpty());
  auto v = Values(sample);
  const boost::json::object& expect = readings.at("expect").as_object();
  for (const auto& [name, value] : expect) {
    SCOPED_TRACE(std::string(readings.at("why").at(name).as_string()));
    EXPECT_DOUBLE_EQ((v[{std::string(name), ""}]), value.to_number<double>()) << name;
  }
  EXPECT_EQ(v.size(), expect.size());  // no GPU series without NVML

  // The appeared devices count from the next sample on.
  const Sample again = sampler->Take(start + 2 * after);
  auto w = Values(again);
  for (const auto& [name, value] : readings.at("again").as_object()) {
    EXPECT_DOUBLE_EQ((w[{std::string(name), ""}]), value.to_number<double>()) << name;
  }
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
