// The few types of NVIDIA's nvml.h that metrics-agent uses, with their C
// layout (the ABI is stable: the _v2 entry points exist since driver 325),
// so the agent builds without CUDA. Shared by the loader (client/nvml.cc)
// and the stand-in libraries of the tests and the fuzzer.
//
// Thread-safety: plain types.
#ifndef METRICS_CLIENT_NVML_ABI_H_
#define METRICS_CLIENT_NVML_ABI_H_

extern "C" {

typedef int nvmlReturn_t;
typedef void* nvmlDevice_t;
struct nvmlUtilization_t {
  unsigned int gpu;
  unsigned int memory;
};
struct nvmlMemory_t {
  unsigned long long total;
  unsigned long long free;
  unsigned long long used;
};
// What nvmlDeviceGetComputeRunningProcesses_v2 and _v3 write per process.
struct nvmlProcessInfo_t {
  unsigned int pid;
  unsigned long long usedGpuMemory;  // ~0ULL: not available
  unsigned int gpuInstanceId;
  unsigned int computeInstanceId;
};

}  // extern "C"

#endif  // METRICS_CLIENT_NVML_ABI_H_
