// Fuzz target: metrics-agent's reading of NVML's answers (client/nvml.cc).
// The library it loads is fuzz/scripted_nvml, answering from the fuzz
// input: failures at any call (the optional signals' too), huge counts,
// UUIDs filling their buffer with no NUL, missing error strings, any
// readings. The agent must come out with
// an error or with readings of the GPUs it found, never read past a buffer.
#include <cstddef>
#include <cstdint>

#include "client/nvml.h"

extern "C" void ScriptedNvmlSet(const uint8_t* data, size_t size);

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  ScriptedNvmlSet(data, size);
  auto nvml = metrics::client::Nvml::Load(SCRIPTED_NVML_PATH);
  if (!nvml.ok()) return 0;
  for (int round = 0; round < 2; ++round) {
    auto readings = (*nvml)->Read();
    if (!readings.ok()) continue;
    if (readings->size() > (*nvml)->uuids().size()) __builtin_trap();
    for (const metrics::client::GpuReading& r : *readings) {
      if (r.uuid == nullptr || r.uuid->size() >= 96) __builtin_trap();
      for (const metrics::client::GpuValue& v : r.values) {
        if (v.name.empty() || v.unit.empty()) __builtin_trap();
      }
    }
    // Each GPU's signal is found unsupported at most once.
    if ((*nvml)->TakeNotes().size() > 10 * (*nvml)->uuids().size()) {
      __builtin_trap();
    }
  }
  return 0;
}
