// What `metrics-agent --once` prints, from a sampler over recorded /proc
// files and the fake NVML (tests/fake_nvml/): every series with its unit
// and GPU, the inventory, the compute processes and the notes.
#include "client/sample_report.h"

#include <boost/json.hpp>

#include <chrono>
#include <cstdlib>
#include <string>

#include "client/host_inventory.h"
#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace metrics::client {
namespace {

namespace json = boost::json;
using ::testing::HasSubstr;
using SteadyClock = std::chrono::steady_clock;

constexpr char kGpu1[] = "GPU-00000000-0000-0000-0000-000000000001";

class SampleReportTest : public ::testing::Test {
 protected:
  void SetUp() override {
    setenv("FAKE_NVML_PROCESSES", "4242:256", 1);
    setenv("FAKE_NVML_UNSUPPORTED", "nvmlDeviceGetPowerUsage", 1);
    inventory_ = HostInventory(TESTDATA_DIR "/t0", "host-a", "metrics-agent test");
    ASSERT_OK_AND_ASSIGN(std::unique_ptr<Nvml> nvml, Nvml::Load(FAKE_NVML_PATH));
    nvml->Describe(inventory_);
    SamplerOptions options;
    options.proc_root = TESTDATA_DIR "/t0";
    options.nvml = std::move(nvml);
    const SteadyClock::time_point start = SteadyClock::now();
    ASSERT_OK_AND_ASSIGN(sampler_, SystemSampler::Create(std::move(options), start));
    sample_ = sampler_->Take(start + std::chrono::seconds(1));
    report_.sample = &sample_;
    report_.inventory = &inventory_;
    report_.processes = sampler_->nvml()->ComputeProcesses();
    report_.interval_seconds = 1;
  }
  void TearDown() override {
    unsetenv("FAKE_NVML_PROCESSES");
    unsetenv("FAKE_NVML_UNSUPPORTED");
  }

  v1::AgentInventory inventory_;
  std::unique_ptr<SystemSampler> sampler_;
  Sample sample_;
  SampleReport report_;
};

// The series `name` of GPU `uuid` ("" for the host's) in `out`, or null.
const json::object* Find(const json::value& out, const std::string& name,
                         const std::string& uuid) {
  for (const json::value& s : out.at("series").as_array()) {
    const json::object& o = s.as_object();
    const json::value* gpu = o.if_contains("gpu_uuid");
    if (o.at("name") == name.c_str() &&
        (gpu == nullptr ? uuid.empty() : *gpu == uuid.c_str())) {
      return &o;
    }
  }
  return nullptr;
}

TEST_F(SampleReportTest, JsonHoldsEverySeriesWithItsUnitAndGpu) {
  const std::string text = SampleJson(report_);
  const json::value out = json::parse(text);

  const json::object* util = Find(out, "gpu_util", kGpu1);
  ASSERT_NE(util, nullptr) << text;
  EXPECT_EQ(util->at("unit"), "percent");
  EXPECT_EQ(util->at("value"), 30);
  EXPECT_EQ(util->at("gpu_index"), 1);
  // Bytes and hertz in full, not as 1.7E10.
  const json::object* total = Find(out, "gpu_memory_total", kGpu1);
  ASSERT_NE(total, nullptr);
  EXPECT_TRUE(total->at("value").is_int64());
  EXPECT_THAT(text, HasSubstr("\"value\": 17179869184"));
  const json::object* clock = Find(out, "gpu_sm_clock", kGpu1);
  ASSERT_NE(clock, nullptr);
  EXPECT_EQ(clock->at("unit"), "hertz");
  EXPECT_EQ(clock->at("value"), 1400000000);
  EXPECT_NE(Find(out, "memory_free", ""), nullptr);
  EXPECT_EQ(Find(out, "gpu_power", kGpu1), nullptr);  // unsupported

  // The inventory as the agent sends it, and what NVML lists as computing.
  EXPECT_EQ(out.at("inventory").at("gpus").at(0).at("index"), 0);
  const json::value& gpu1 = out.at("inventory").at("gpus").at(1);
  EXPECT_EQ(gpu1.at("uuid"), kGpu1);
  EXPECT_EQ(gpu1.at("name"), "Fake GPU 16GB");
  EXPECT_EQ(out.at("inventory").at("driver_version"), "550.54.15");
  const json::value& processes = out.at("gpu_processes").at(1);
  EXPECT_EQ(processes.at("gpu_uuid"), kGpu1);
  EXPECT_EQ(processes.at("processes").at(0).at("pid"), 4242);
  EXPECT_EQ(processes.at("processes").at(0).at("used_memory_bytes"), 512 << 20);

  // Each GPU's unsupported signal is a note, not an error.
  const json::array& notes = out.at("notes").as_array();
  ASSERT_EQ(notes.size(), 2u) << text;
  EXPECT_THAT(std::string(notes[1].as_string()),
              HasSubstr(std::string(kGpu1) + ": gpu_power is not supported"));
  EXPECT_TRUE(out.at("errors").as_array().empty()) << text;
  EXPECT_EQ(out.at("interval_seconds").to_number<double>(), 1.0);
}

TEST_F(SampleReportTest, TextHasOneLinePerSeriesProcessAndNote) {
  const std::string text = SampleText(report_);
  EXPECT_THAT(text, HasSubstr("\ngpu_memory_total gpu=1 " + std::string(kGpu1) +
                              " 17179869184 bytes\n"));
  EXPECT_THAT(text, HasSubstr("gpu process gpu=1 pid=4242 536870912 bytes\n"));
  EXPECT_THAT(text, HasSubstr("note: " + std::string(kGpu1) +
                              ": gpu_power is not supported"));
}

}  // namespace
}  // namespace metrics::client
