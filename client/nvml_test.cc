// The NVML loader against the fake libnvidia-ml built for tests
// (tests/fake_nvml/): its GPUs and readings, and the errors of a
// missing library, a failed init or a broken answer.
#include "client/nvml.h"

#include <cstdlib>
#include <map>
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

TEST(NvmlTest, MissingLibraryOrFailedInitIsAnErrorNotACrash) {
  EXPECT_THAT(Nvml::Load("/nonexistent/libnvidia-ml.so.1"),
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

}  // namespace
}  // namespace metrics::client
