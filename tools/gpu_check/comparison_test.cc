// The GPU check's parsing of nvidia-smi's answers and its verdicts, on
// answers written the way nvidia-smi prints them.
#include "tools/gpu_check/comparison.h"

#include <map>
#include <string>
#include <vector>

#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace metrics::gpu_check {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Optional;

constexpr char kUuid[] = "GPU-5b1e2d3c-aaaa-bbbb-cccc-0123456789ab";

TEST(NvidiaSmiTest, NumbersHexAndTheWordsForNone) {
  EXPECT_THAT(SmiNumber(" 69.47"), Optional(69.47));
  EXPECT_THAT(SmiNumber("0x0000000000000004"), Optional(4.0));
  EXPECT_EQ(SmiNumber("[N/A]"), std::nullopt);
  EXPECT_EQ(SmiNumber("[Not Supported]"), std::nullopt);
  EXPECT_EQ(SmiNumber("0xzz"), std::nullopt);
}

TEST(NvidiaSmiTest, QueryGpuKeepsANameWithCommasWhole) {
  ASSERT_OK_AND_ASSIGN(
      std::vector<SmiGpu> gpus,
      ParseQueryGpu("0, GPU-a, 81559, NVIDIA H100, 80GB HBM3\n1, GPU-b, [N/A], Other\n",
                    {"index", "uuid", "memory.total", "name"}));
  ASSERT_EQ(gpus.size(), 2u);
  EXPECT_EQ(gpus[0]["name"], "NVIDIA H100, 80GB HBM3");
  EXPECT_EQ(gpus[1]["memory.total"], "[N/A]");
  EXPECT_THAT(ParseQueryGpu("0, GPU-a\n", {"index", "uuid", "name"}),
              test_util::StatusIs(absl::StatusCode::kInvalidArgument,
                                  HasSubstr("3 fields expected in \"0, GPU-a\"")));
}

TEST(NvidiaSmiTest, ComputeAppsAndDmon) {
  ASSERT_OK_AND_ASSIGN(std::vector<SmiProcess> apps,
                       ParseComputeApps("GPU-a, 4242, 1024\nGPU-b, 17, [N/A]\n"));
  ASSERT_EQ(apps.size(), 2u);
  EXPECT_EQ(apps[0].pid, 4242);
  EXPECT_THAT(apps[0].used_mib, Optional(1024.0));
  EXPECT_EQ(apps[1].used_mib, std::nullopt);
  EXPECT_THAT(ParseComputeApps("No running processes found, x"),
              test_util::StatusIs(absl::StatusCode::kInvalidArgument));

  ASSERT_OK_AND_ASSIGN(auto dmon, ParseDmon("# gpu  rxpci  txpci\n# Idx   MB/s   MB/s\n"
                                            "    0     12      3\n    1      -      0\n"));
  EXPECT_EQ(dmon[0]["rxpci"], 12);
  EXPECT_EQ(dmon[1].count("rxpci"), 0u);
  EXPECT_EQ(dmon[1]["txpci"], 0);
  EXPECT_THAT(ParseDmon("0 1 2\n"), test_util::StatusIs(absl::StatusCode::kInvalidArgument));
}

class CompareTest : public ::testing::Test {
 protected:
  void SetUp() override {
    SmiGpu gpu = {{"index", "0"}, {"uuid", kUuid}, {"name", "NVIDIA H200"},
                  {"driver_version", "550.54.15"}};
    for (const std::string& field : QueryGpuFields()) gpu.emplace(field, "[N/A]");
    gpu["memory.total"] = "143771";
    gpu["utilization.gpu"] = "40";
    gpu["temperature.gpu"] = "48";
    gpu["enforced.power.limit"] = "700.00";
    gpu["clocks_throttle_reasons.active"] = "0x0000000000000004";
    smi_.gpus = {gpu};
    smi_.processes = std::vector<SmiProcess>{{kUuid, 4242, 1024.0}, {kUuid, 99, 10.0}};
    for (double util : {35.0, 55.0}) {
      ClientReadings& r = readings_.emplace_back();
      r.gpus[kUuid] = {0, "NVIDIA H200"};
      r.driver_version = "550.54.15";
      r.values[{"gpu_memory_total", kUuid}] = 143771.0 * (1 << 20);
      r.values[{"gpu_util", kUuid}] = util;
      r.values[{"gpu_temperature", kUuid}] = 60;  // far from nvidia-smi's 48
      r.values[{"gpu_power_limit", kUuid}] = 700;
      r.values[{"gpu_throttle_reasons", kUuid}] = util == 35 ? 4 : 0;
      r.processes[kUuid][4242] = 1024.5 * (1 << 20);
      r.notes = {std::string(kUuid) + ": gpu_power is not supported (nvmlDeviceGetPowerUsage: "
                 "Not Supported); not reported"};
    }
  }

  std::map<std::string, Row> Rows(const CompareOptions& options = {}) {
    std::map<std::string, Row> rows;
    for (Row& row : Compare(smi_, readings_, options)) rows[row.signal] = std::move(row);
    return rows;
  }

  SmiAnswers smi_;
  std::vector<ClientReadings> readings_;
};

TEST_F(CompareTest, EachSignalJudgedByItsRule) {
  std::map<std::string, Row> rows = Rows();
  EXPECT_EQ(rows["uuid " + std::string(kUuid)].verdict, Verdict::kAgree);
  EXPECT_EQ(rows["name"].verdict, Verdict::kAgree);
  EXPECT_EQ(rows["driver_version"].verdict, Verdict::kAgree);
  EXPECT_EQ(rows["gpu_memory_total"].verdict, Verdict::kAgree);
  EXPECT_EQ(rows["gpu_memory_total"].client, "143771, 143771");
  EXPECT_EQ(rows["gpu_power_limit"].verdict, Verdict::kAgree);
  // 40 lies between the readings 35 and 55.
  EXPECT_EQ(rows["gpu_util"].verdict, Verdict::kAgree);
  EXPECT_EQ(rows["gpu_throttle_reasons"].verdict, Verdict::kAgree);
  EXPECT_EQ(rows["gpu_throttle_reasons"].smi, "0x4 bitset");
  // The disagreeing reading is reported, with both answers.
  const Row& temperature = rows["gpu_temperature"];
  EXPECT_EQ(temperature.verdict, Verdict::kDiffer);
  EXPECT_EQ(temperature.smi, "48 C");
  EXPECT_EQ(temperature.client, "60, 60");
  // Answered by neither: the client's note says why.
  EXPECT_EQ(rows["gpu_power"].verdict, Verdict::kNeither);
  EXPECT_THAT(rows["gpu_power"].note, HasSubstr("gpu_power is not supported"));
  // dmon was not asked.
  EXPECT_EQ(rows["gpu_pcie_rx"].verdict, Verdict::kUnchecked);
  // A process both list, and one only nvidia-smi lists.
  EXPECT_EQ(rows["process 4242"].verdict, Verdict::kAgree);
  EXPECT_EQ(rows["process 99"].verdict, Verdict::kDiffer);
  EXPECT_EQ(rows["process 99"].client, "not listed");
}

TEST_F(CompareTest, AValueOnlyOneSideHasDiffers) {
  smi_.gpus[0]["power.draw"] = "69.47";
  readings_[0].values[{"gpu_ecc_corrected", kUuid}] = 0;
  std::map<std::string, Row> rows = Rows();
  EXPECT_EQ(rows["gpu_power"].verdict, Verdict::kDiffer);
  EXPECT_EQ(rows["gpu_power"].client, "not reported");
  EXPECT_EQ(rows["gpu_ecc_corrected"].verdict, Verdict::kDiffer);
  EXPECT_EQ(rows["gpu_ecc_corrected"].client, "0, -");
}

TEST_F(CompareTest, TheJobsGpuMemoryAgainstItsProcessesUse) {
  readings_[0].values[{"process_gpu_memory", kUuid}] = 1024.0 * (1 << 20);
  readings_[1].values[{"process_gpu_memory", kUuid}] = 1025.0 * (1 << 20);
  CompareOptions options;
  options.pid = 4242;
  options.pid_visible = [](int64_t pid) { return pid != 99; };
  std::map<std::string, Row> rows = Rows(options);
  EXPECT_EQ(rows["process_gpu_memory (pid 4242)"].verdict, Verdict::kAgree);
  EXPECT_EQ(rows["process_gpu_memory (pid 4242)"].smi, "1024 MiB");
  EXPECT_EQ(rows["process 99"].note, "not a process of this PID namespace");
  options.pid = 17;  // nvidia-smi lists none for it: 0 MiB, the client 1 GiB
  EXPECT_EQ(Rows(options)["process_gpu_memory (pid 17)"].verdict, Verdict::kDiffer);
}

TEST_F(CompareTest, AGpuOnlyOneSideSeesDiffers) {
  readings_[0].gpus.erase(kUuid);
  readings_[1].gpus.erase(kUuid);
  readings_[1].gpus["GPU-other"] = {1, "x"};
  std::vector<Row> rows = Compare(smi_, readings_, {});
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0].client, "not seen");
  EXPECT_EQ(rows[0].verdict, Verdict::kDiffer);
  EXPECT_EQ(rows[1].signal, "uuid GPU-other");
  EXPECT_EQ(rows[1].verdict, Verdict::kDiffer);
  EXPECT_THAT(Tally(rows), "0 agree, 2 differ, 0 answered by neither, 0 unchecked");
}

TEST_F(CompareTest, TheTableEscapesItsCells) {
  Row row{"a|b", "0", "1 W", "2, 3", "±5 W", Verdict::kDiffer, ""};
  EXPECT_THAT(MarkdownTable({row}, "metrics-agent"),
              HasSubstr("| a\\|b | 0 | 1 W | 2, 3 | ±5 W | **DIFFER** |  |\n"));
}

}  // namespace
}  // namespace metrics::gpu_check
