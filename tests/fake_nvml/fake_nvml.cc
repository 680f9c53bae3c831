// A stand-in for NVIDIA's libnvidia-ml.so.1 with the entry points
// client/nvml.cc uses, so tests and benchmarks exercise the agent's GPU
// path on machines without GPUs. GPU i (from 0) has UUID
// "GPU-00000000-0000-0000-0000-00000000000<i>", utilisation 10 + 20 i
// percent and (i + 1) GiB free. FAKE_NVML_GPU_COUNT sets the number of GPUs
// (default 2); FAKE_NVML_FAIL_INIT=1 makes nvmlInit_v2 fail;
// FAKE_NVML_UUID_UNTERMINATED=1 fills the UUID buffer with no NUL.
//
// Thread-safety: as NVML, callable from any thread (the state is constant).
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "client/nvml_abi.h"

namespace {

struct FakeDevice {
  unsigned int index;
};

constexpr unsigned int kMaxGpus = 64;
FakeDevice devices[kMaxGpus];

unsigned int GpuCount() {
  const char* env = std::getenv("FAKE_NVML_GPU_COUNT");
  if (env == nullptr) return 2;
  const unsigned long n = std::strtoul(env, nullptr, 10);
  return n > kMaxGpus ? kMaxGpus : static_cast<unsigned int>(n);
}

constexpr int kSuccess = 0;
constexpr int kInvalidArgument = 2;
constexpr int kUnknown = 999;

}  // namespace

extern "C" {

int nvmlInit_v2() {
  const char* fail = std::getenv("FAKE_NVML_FAIL_INIT");
  return fail != nullptr && std::strcmp(fail, "1") == 0 ? kUnknown : kSuccess;
}

int nvmlShutdown() { return kSuccess; }

const char* nvmlErrorString(int result) {
  return result == kSuccess ? "Success" : "Unknown Error";
}

int nvmlDeviceGetCount_v2(unsigned int* count) {
  *count = GpuCount();
  return kSuccess;
}

int nvmlDeviceGetHandleByIndex_v2(unsigned int index, void** device) {
  if (index >= GpuCount()) return kInvalidArgument;
  devices[index].index = index;
  *device = &devices[index];
  return kSuccess;
}

int nvmlDeviceGetUUID(void* device, char* uuid, unsigned int length) {
  const unsigned int i = static_cast<FakeDevice*>(device)->index;
  const char* broken = std::getenv("FAKE_NVML_UUID_UNTERMINATED");
  if (broken != nullptr && std::strcmp(broken, "1") == 0) {
    std::memset(uuid, 'F', length);
    return kSuccess;
  }
  std::snprintf(uuid, length, "GPU-00000000-0000-0000-0000-%012u", i);
  return kSuccess;
}

int nvmlDeviceGetUtilizationRates(void* device, nvmlUtilization_t* u) {
  const unsigned int i = static_cast<FakeDevice*>(device)->index;
  u->gpu = 10 + 20 * i;
  u->memory = 5;
  return kSuccess;
}

int nvmlDeviceGetMemoryInfo(void* device, nvmlMemory_t* m) {
  const unsigned long long i = static_cast<FakeDevice*>(device)->index;
  m->total = 16ULL << 30;
  m->free = (i + 1) << 30;
  m->used = m->total - m->free;
  return kSuccess;
}

}  // extern "C"
