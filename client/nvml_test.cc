// The NVML loader against the fake libnvidia-ml built for tests
// (tests/fake_nvml/): its GPUs and readings, and the errors of a
// missing library, a failed init or a broken answer.
#include "client/nvml.h"

#include <cstdlib>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace metrics::client {
namespace {

using ::metrics::test_util::StatusIs;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(NvmlTest, FakeLibraryGivesTwoKnownGpus) {
  ASSERT_OK_AND_ASSIGN(auto nvml, Nvml::Load(FAKE_NVML_PATH));
  EXPECT_THAT(nvml->uuids(),
              ElementsAre("GPU-00000000-0000-0000-0000-000000000000",
                          "GPU-00000000-0000-0000-0000-000000000001"));
  ASSERT_OK_AND_ASSIGN(std::vector<GpuReading> gpus, nvml->Read());
  ASSERT_EQ(gpus.size(), 2u);
  EXPECT_EQ(gpus[0].utilization_percent, 10);
  EXPECT_EQ(gpus[0].free_memory_bytes, uint64_t{1} << 30);
  EXPECT_EQ(gpus[1].utilization_percent, 30);
  EXPECT_EQ(gpus[1].free_memory_bytes, uint64_t{2} << 30);
  std::map<std::string, std::pair<std::string, double>> values;
  for (const GpuValue& v : gpus[1].values) {
    values[std::string(v.name)] = {std::string(v.unit), v.value};
  }
  using V = std::pair<std::string, double>;
  EXPECT_THAT(values, testing::UnorderedElementsAre(
      testing::Pair("gpu_memory_used", V{"bytes", double(uint64_t{14} << 30)}),
      testing::Pair("gpu_memory_total", V{"bytes", double(uint64_t{16} << 30)}),
      testing::Pair("gpu_memory_util", V{"percent", 5}),
      testing::Pair("gpu_power", V{"watts", 110}),
      testing::Pair("gpu_power_limit", V{"watts", 300}),
      testing::Pair("gpu_temperature", V{"celsius", 41}),
      testing::Pair("gpu_sm_clock", V{"hertz", 1.4e9}),
      testing::Pair("gpu_memory_clock", V{"hertz", 2.6e9}),
      testing::Pair("gpu_pcie_rx", V{"bytes/s", 1001 * 1024}),
      testing::Pair("gpu_pcie_tx", V{"bytes/s", 500 * 1024}),
      testing::Pair("gpu_ecc_corrected", V{"errors", 1}),
      testing::Pair("gpu_ecc_uncorrected", V{"errors", 0}),
      testing::Pair("gpu_throttle_reasons", V{"bitset", 4})));
  EXPECT_THAT(nvml->TakeNotes(), testing::IsEmpty());
}

TEST(NvmlTest, ComputeProcessesListsEveryProcessOfEachGpu) {
  setenv("FAKE_NVML_PROCESSES", "4242:256,17:64", 1);
  ASSERT_OK_AND_ASSIGN(auto nvml, Nvml::Load(FAKE_NVML_PATH));
  std::vector<std::optional<std::vector<Nvml::GpuProcess>>> processes =
      nvml->ComputeProcesses();
  ASSERT_EQ(processes.size(), 2u);
  for (size_t gpu = 0; gpu < 2; ++gpu) {
    ASSERT_TRUE(processes[gpu].has_value()) << gpu;
    std::map<unsigned int, uint64_t> used;
    for (const Nvml::GpuProcess& p : *processes[gpu]) used[p.pid] = *p.used_memory_bytes;
    // The fake's GPU i gives each process (i + 1) times its MiB.
    EXPECT_THAT(used, testing::UnorderedElementsAre(
                          testing::Pair(4242u, (gpu + 1) * (uint64_t{256} << 20)),
                          testing::Pair(17u, (gpu + 1) * (uint64_t{64} << 20))));
  }
  EXPECT_THAT(nvml->ProcessMemory({4242}),
              ElementsAre(uint64_t{256} << 20, uint64_t{512} << 20));
  // A GPU that cannot say has no list, and says so once.
  setenv("FAKE_NVML_UNSUPPORTED", "nvmlDeviceGetComputeRunningProcesses_v3", 1);
  processes = nvml->ComputeProcesses();
  EXPECT_FALSE(processes[0].has_value());
  EXPECT_FALSE(processes[1].has_value());
  EXPECT_THAT(nvml->TakeNotes(),
              ElementsAre(HasSubstr("process_gpu_memory is not supported"),
                          HasSubstr("process_gpu_memory is not supported")));
  nvml->ComputeProcesses();
  EXPECT_THAT(nvml->TakeNotes(), testing::IsEmpty());
  unsetenv("FAKE_NVML_UNSUPPORTED");
  unsetenv("FAKE_NVML_PROCESSES");
}

TEST(NvmlTest, MissingLibraryOrFailedInitIsAnErrorNotACrash) {
  EXPECT_THAT(Nvml::Load("/nonexistent/libnvidia-ml.so.1"),
              StatusIs(absl::StatusCode::kUnavailable,
                       "/nonexistent/libnvidia-ml.so.1 not found"));
  // A file that is no library: dlopen's own words.
  EXPECT_THAT(Nvml::Load(TESTDATA_DIR "/t0/meminfo"),
              StatusIs(absl::StatusCode::kUnavailable,
                       HasSubstr("cannot load")));
  setenv("FAKE_NVML_FAIL_INIT", "1", 1);
  auto failed = Nvml::Load(FAKE_NVML_PATH);
  unsetenv("FAKE_NVML_FAIL_INIT");
  EXPECT_THAT(failed, StatusIs(absl::StatusCode::kInternal,
                               HasSubstr("nvmlInit_v2")));
}

// NVML promises a NUL inside the UUID buffer; a library that fills it
// whole is refused rather than read past the buffer.
TEST(NvmlTest, UuidWithNoNulIsAnError) {
  setenv("FAKE_NVML_UUID_UNTERMINATED", "1", 1);
  auto broken = Nvml::Load(FAKE_NVML_PATH);
  unsetenv("FAKE_NVML_UUID_UNTERMINATED");
  EXPECT_THAT(broken, StatusIs(absl::StatusCode::kInternal,
                               HasSubstr("GPU 0: nvmlDeviceGetUUID answered "
                                         "no NUL-terminated UUID")));
}

TEST(NvmlTest, DescribesDriverCudaAndEachGpu) {
  ASSERT_OK_AND_ASSIGN(auto nvml, Nvml::Load(FAKE_NVML_PATH));
  v1::AgentInventory inventory;
  nvml->Describe(inventory);
  EXPECT_EQ(inventory.driver_version(), "550.54.15");
  EXPECT_EQ(inventory.cuda_version(), "12.4");
  ASSERT_EQ(inventory.gpus_size(), 2);
  EXPECT_EQ(inventory.gpus(1).index(), 1);
  EXPECT_EQ(inventory.gpus(1).uuid(), "GPU-00000000-0000-0000-0000-000000000001");
  EXPECT_EQ(inventory.gpus(1).name(), "Fake GPU 16GB");
  EXPECT_EQ(inventory.gpus(1).memory_total_bytes(), int64_t{16} << 30);
  EXPECT_EQ(inventory.gpus(1).mig_mode(), "disabled");
  EXPECT_TRUE(inventory.gpus(1).mig_devices().empty());
}

TEST(NvmlTest, NoMigSupportLeavesTheModeEmpty) {
  setenv("FAKE_NVML_UNSUPPORTED", "nvmlDeviceGetMigMode,nvmlDeviceGetName", 1);
  auto nvml = Nvml::Load(FAKE_NVML_PATH);
  ASSERT_OK(nvml.status());
  v1::AgentInventory inventory;
  (*nvml)->Describe(inventory);
  unsetenv("FAKE_NVML_UNSUPPORTED");
  ASSERT_EQ(inventory.gpus_size(), 2);
  EXPECT_EQ(inventory.gpus(0).mig_mode(), "");
  EXPECT_EQ(inventory.gpus(0).name(), "");
  EXPECT_TRUE((*nvml)->mig_uuids().empty());
}

// A GPU in MIG mode has no utilisation of its own; each MIG device reports
// its memory, keyed by its own UUID. Empty slots are skipped.
TEST(NvmlTest, MigDevicesReportTheirMemory) {
  setenv("FAKE_NVML_MIG", "1", 1);
  auto loaded = Nvml::Load(FAKE_NVML_PATH);
  unsetenv("FAKE_NVML_MIG");
  ASSERT_OK(loaded.status());
  Nvml& nvml = **loaded;
  EXPECT_THAT(nvml.mig_uuids(),
              ElementsAre("MIG-00000000-0000-0000-0000-000000010000",
                          "MIG-00000000-0000-0000-0000-000000010002"));
  v1::AgentInventory inventory;
  nvml.Describe(inventory);
  EXPECT_EQ(inventory.gpus(0).mig_mode(), "disabled");
  EXPECT_EQ(inventory.gpus(1).mig_mode(), "enabled");
  EXPECT_THAT(inventory.gpus(1).mig_devices(),
              ElementsAre("MIG-00000000-0000-0000-0000-000000010000",
                          "MIG-00000000-0000-0000-0000-000000010002"));

  setenv("FAKE_NVML_MIG", "1", 1);
  auto read = nvml.Read();
  unsetenv("FAKE_NVML_MIG");
  ASSERT_OK(read.status());
  ASSERT_EQ(read->size(), 4u);
  EXPECT_EQ((*read)[0].utilization_percent, 10);
  // The MIG-mode GPU: memory and its other signals, no utilisation.
  EXPECT_EQ(*(*read)[1].uuid, "GPU-00000000-0000-0000-0000-000000000001");
  EXPECT_FALSE((*read)[1].utilization_percent.has_value());
  std::vector<std::string> names;
  for (const GpuValue& v : (*read)[1].values) names.emplace_back(v.name);
  EXPECT_THAT(names, testing::Not(testing::Contains("gpu_memory_util")));
  EXPECT_THAT(names, testing::Contains("gpu_power"));
  const GpuReading& mig = (*read)[3];
  EXPECT_EQ(*mig.uuid, "MIG-00000000-0000-0000-0000-000000010002");
  EXPECT_FALSE(mig.utilization_percent.has_value());
  EXPECT_EQ(mig.free_memory_bytes, uint64_t{5} << 30);
  ASSERT_EQ(mig.values.size(), 2u);
  EXPECT_EQ(mig.values[0].name, "gpu_memory_used");
  EXPECT_EQ(mig.values[0].value, double(uint64_t{3} << 30));
  EXPECT_EQ(mig.values[1].name, "gpu_memory_total");
  EXPECT_EQ(mig.values[1].value, double(uint64_t{8} << 30));
}

// A GPU that falls off the bus mid-run is left out of each reading; the
// others go on, and the reading fails only when none answers.
TEST(NvmlTest, GpuLostMidRunIsLeftOut) {
  setenv("FAKE_NVML_LOST_AFTER", "2", 1);
  auto loaded = Nvml::Load(FAKE_NVML_PATH);
  ASSERT_OK(loaded.status());
  Nvml& nvml = **loaded;
  for (int i = 0; i < 2; ++i) {
    auto read = nvml.Read();
    ASSERT_OK(read.status());
    EXPECT_EQ(read->size(), 2u) << "reading " << i;
  }
  auto read = nvml.Read();
  unsetenv("FAKE_NVML_LOST_AFTER");
  ASSERT_OK(read.status());
  ASSERT_EQ(read->size(), 1u);
  EXPECT_EQ(*(*read)[0].uuid, "GPU-00000000-0000-0000-0000-000000000001");
  setenv("FAKE_NVML_LOST_AFTER", "0", 1);
  setenv("FAKE_NVML_GPU_COUNT", "1", 1);
  auto alone = Nvml::Load(FAKE_NVML_PATH);
  ASSERT_OK(alone.status());
  EXPECT_THAT((*alone)->Read(),
              StatusIs(absl::StatusCode::kUnavailable,
                       HasSubstr("nvmlDeviceGetMemoryInfo failed")));
  unsetenv("FAKE_NVML_LOST_AFTER");
  unsetenv("FAKE_NVML_GPU_COUNT");
}

}  // namespace
}  // namespace metrics::client
