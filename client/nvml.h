// GPU utilisation and free memory through NVIDIA's management library,
// loaded at run time with dlopen, so metrics-agent needs no CUDA at build
// time and runs unchanged on hosts without NVIDIA GPUs (Load then fails and
// the agent reports no GPU series).
//
// Thread-compatible: one thread samples at a time.
#ifndef METRICS_CLIENT_NVML_H_
#define METRICS_CLIENT_NVML_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace metrics::client {

struct GpuReading {
  const std::string* uuid;  // owned by the Nvml object
  double utilization_percent = 0;
  uint64_t free_memory_bytes = 0;
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

  // One reading per GPU; a GPU that fails to answer is left out (and
  // named in the error when none answers).
  absl::StatusOr<std::vector<GpuReading>> Read();

 private:
  struct Api;
  Nvml(void* handle, std::unique_ptr<Api> api);

  void* handle_;
  std::unique_ptr<Api> api_;
  std::vector<void*> devices_;
  std::vector<std::string> uuids_;
};

}  // namespace metrics::client

#endif  // METRICS_CLIENT_NVML_H_
