// Fuzz target: metrics-agent's reading of NVML's answers (client/nvml.cc).
// The library it loads is fuzz/scripted_nvml, answering from the fuzz
// input: failures at any call (the optional signals' too), huge counts,
// UUIDs filling their buffer with no NUL, missing error strings, any
// readings, names and versions, MIG modes and devices. The agent must come
// out with an error or with readings of the GPUs and MIG devices it found,
// never read past a buffer, and describe them in an inventory the server
// takes (printable text within its bounds).
#include <cstddef>
#include <cstdint>

#include "client/host_inventory.h"
#include "client/nvml.h"

namespace {

void CheckText(const std::string& text) {
  if (text.size() > metrics::signals::kMaxInventoryText) __builtin_trap();
  for (char c : text) {
    if (c < 0x20 || c > 0x7e) __builtin_trap();
  }
}

}  // namespace

extern "C" void ScriptedNvmlSet(const uint8_t* data, size_t size);

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  ScriptedNvmlSet(data, size);
  auto nvml = metrics::client::Nvml::Load(SCRIPTED_NVML_PATH);
  if (!nvml.ok()) return 0;
  metrics::v1::AgentInventory inventory;
  (*nvml)->Describe(inventory);
  CheckText(inventory.driver_version());
  CheckText(inventory.cuda_version());
  if (static_cast<size_t>(inventory.gpus_size()) > metrics::signals::kMaxInventoryGpus) {
    __builtin_trap();
  }
  for (const metrics::v1::GpuInventory& gpu : inventory.gpus()) {
    CheckText(gpu.uuid());
    CheckText(gpu.name());
    if (static_cast<size_t>(gpu.mig_devices_size()) > metrics::signals::kMaxMigDevicesPerGpu) {
      __builtin_trap();
    }
    for (const std::string& m : gpu.mig_devices()) CheckText(m);
  }
  size_t notes = 0;
  for (int round = 0; round < 2; ++round) {
    auto readings = (*nvml)->Read();
    if (!readings.ok()) continue;
    if (readings->size() >
        (*nvml)->uuids().size() + (*nvml)->mig_uuids().size()) {
      __builtin_trap();
    }
    for (const metrics::client::GpuReading& r : *readings) {
      if (r.uuid == nullptr || r.uuid->size() >= 96) __builtin_trap();
      for (const metrics::client::GpuValue& v : r.values) {
        if (v.name.empty() || v.unit.empty()) __builtin_trap();
      }
    }
    const auto used = (*nvml)->ProcessMemory({0, 1, 42});
    if (used.size() != (*nvml)->uuids().size()) __builtin_trap();
    notes += (*nvml)->TakeNotes().size();
  }
  // Each GPU's 10 signals and its processes' memory are found unsupported
  // at most once; each of its MIG slots asked (16 at most) is noted at most
  // once, at Load.
  if (notes > (11 + 16) * (*nvml)->uuids().size()) __builtin_trap();
  return 0;
}
