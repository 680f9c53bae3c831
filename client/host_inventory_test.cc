// The host part of the agent's inventory, from recorded /proc files.
#include "client/host_inventory.h"

#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace metrics::client {
namespace {

using ::metrics::test_util::StatusIs;

TEST(HostInventoryTest, ReadsCpuAndMemoryFromProc) {
  const v1::AgentInventory inventory =
      HostInventory(TESTDATA_DIR "/t0", "node-7", "metrics-agent 1.0.0");
  EXPECT_EQ(inventory.host_name(), "node-7");
  EXPECT_EQ(inventory.agent_version(), "metrics-agent 1.0.0");
  EXPECT_EQ(inventory.cpu_model(), "Intel(R) Xeon(R) Platinum 8480+");
  EXPECT_EQ(inventory.cpu_sockets(), 2);
  EXPECT_EQ(inventory.cpu_count(), 4);
  EXPECT_EQ(inventory.memory_total_bytes(), int64_t{32768000} * 1024);
}

TEST(HostInventoryTest, MissingFilesLeaveFieldsEmpty) {
  const v1::AgentInventory inventory =
      HostInventory("/nonexistent", "node-7", "metrics-agent 1.0.0");
  EXPECT_EQ(inventory.cpu_count(), 0);
  EXPECT_EQ(inventory.memory_total_bytes(), 0);
  EXPECT_EQ(inventory.host_name(), "node-7");
}

TEST(HostInventoryTest, ArmCpuInfoWithoutPackages) {
  ASSERT_OK_AND_ASSIGN(
      CpuInfo info,
      ParseCpuInfo("processor\t: 0\nBogoMIPS\t: 50.00\n\nprocessor\t: 1\n\n"
                   "Model\t\t: Raspberry Pi 4 Model B Rev 1.4\n"));
  EXPECT_EQ(info.model, "Raspberry Pi 4 Model B Rev 1.4");
  EXPECT_EQ(info.sockets, 1);
  EXPECT_EQ(info.threads, 2);
  EXPECT_THAT(ParseCpuInfo(""), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(ParseMemTotalBytes("MemTotal: lots\n"),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(ParseMemTotalBytes("MemTotal: 555555555532768000 kB\n"),
              StatusIs(absl::StatusCode::kInvalidArgument));
}

// Whatever NVML or /proc answer, the inventory carries printable text within
// the server's bound (a control byte or invalid UTF-8 would refuse the batch,
// or break the message).
TEST(HostInventoryTest, TextIsMadePrintableAndBounded) {
  EXPECT_EQ(InventoryText("NVIDIA H100"), "NVIDIA H100");
  EXPECT_EQ(InventoryText(absl::string_view("A\n\xff\0B", 5)), "A???B");
  EXPECT_EQ(InventoryText(std::string(300, 'x')).size(), signals::kMaxInventoryText);
}

}  // namespace
}  // namespace metrics::client
