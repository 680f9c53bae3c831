// GPU readings (utilisation, memory, power, temperature, clocks, PCIe
// throughput, ECC errors, throttling; memory of each MIG device) and what
// the GPUs are (models, driver, MIG mode) through NVIDIA's management library,
// loaded at run time with dlopen, so metrics-agent needs no CUDA at build
// time and runs unchanged on hosts without NVIDIA GPUs (Load then fails and
// the agent reports no GPU series).
//
// Thread-compatible: one thread samples at a time.
#ifndef METRICS_CLIENT_NVML_H_
#define METRICS_CLIENT_NVML_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "client/nvml_abi.h"
#include "proto/metrics/v1/ingest.pb.h"

namespace metrics::client {

// One signal's value; name and unit are static strings.
struct GpuValue {
  absl::string_view name;  // e.g. "gpu_power"
  absl::string_view unit;  // e.g. "watts"
  double value = 0;
};

struct GpuReading {
  const std::string* uuid;  // owned by the Nvml object; "MIG-..." for MIG
  // Unset where NVML has none: a MIG device, a GPU in MIG mode.
  std::optional<double> utilization_percent;
  uint64_t free_memory_bytes = 0;
  // The other signals this GPU answered this time (docs/clients.md lists
  // them with their NVML calls and units).
  std::vector<GpuValue> values;
};

class Nvml {
 public:
  // Opens `library` (a file name searched the usual dlopen way, or a path)
  // and initialises NVML. UNAVAILABLE when the library or one of its
  // functions is missing; INTERNAL naming the NVML error when it fails.
  static absl::StatusOr<std::unique_ptr<Nvml>> Load(
      const std::string& library = "libnvidia-ml.so.1");
  ~Nvml();

  Nvml(const Nvml&) = delete;
  Nvml& operator=(const Nvml&) = delete;

  // The GPUs found at Load, by UUID ("GPU-...").
  const std::vector<std::string>& uuids() const { return uuids_; }
  // The MIG devices found at Load (of GPUs in MIG mode), by UUID ("MIG-...").
  // A MIG layout changed later is not seen until the agent restarts.
  const std::vector<std::string>& mig_uuids() const { return mig_uuids_; }

  // Adds the driver and CUDA versions and each GPU (index, UUID, model,
  // memory, MIG mode and devices) to `inventory`; what NVML does not answer
  // is left empty.
  void Describe(v1::AgentInventory& inventory) const;

  // One reading per GPU, then one per MIG device (memory only); a device
  // that fails to answer is left out (and named in the error when none
  // answers). A signal a GPU (or the library)
  // does not support is left out from then on, and said once by
  // TakeNotes.
  absl::StatusOr<std::vector<GpuReading>> Read();

  // One process NVML lists as computing on a GPU.
  struct GpuProcess {
    unsigned int pid;  // as NVML numbers it: maybe another PID namespace's
    std::optional<uint64_t> used_memory_bytes;  // unset: NVML cannot say
  };
  // Per GPU (in uuids() order), the compute processes on it
  // (nvmlDeviceGetComputeRunningProcesses); unset for a GPU that cannot
  // say (said once by TakeNotes) or did not answer this time.
  std::vector<std::optional<std::vector<GpuProcess>>> ComputeProcesses();

  // Per GPU (in uuids() order), the GPU memory the processes `pids` use,
  // from ComputeProcesses. A process NVML lists under another PID
  // namespace's number is not matched.
  std::vector<std::optional<uint64_t>> ProcessMemory(
      const absl::flat_hash_set<int>& pids);

  // One line per signal found unsupported since the last call, e.g.
  // "GPU-...: gpu_power is not supported (nvmlDeviceGetPowerUsage: Not
  // Supported); not reported".
  std::vector<std::string> TakeNotes();

 private:
  struct Api;
  Nvml(void* handle, std::unique_ptr<Api> api);
  void ReadSignals(size_t device, GpuReading& reading);
  void FindMigDevices(size_t gpu);
  absl::StatusOr<std::string> Uuid(nvmlDevice_t device) const;

  void* handle_;
  std::unique_ptr<Api> api_;
  std::vector<void*> devices_;
  std::vector<std::string> uuids_;
  std::vector<std::string> mig_modes_;  // per GPU: "enabled", "disabled", ""
  std::vector<void*> mig_devices_;
  std::vector<std::string> mig_uuids_;
  std::vector<size_t> mig_parents_;  // per MIG device: its GPU's place
  std::vector<bool> processes_unsupported_;  // per GPU
  // Per device, a bit per optional signal (kSignals in nvml.cc) found
  // unsupported.
  std::vector<uint32_t> unsupported_;
  std::vector<std::string> notes_;
};

}  // namespace metrics::client

#endif  // METRICS_CLIENT_NVML_H_
