// A stand-in for the driver's libcuda.so.1 with the entry points gpu-load
// uses, so the GPU check's tests start and stop a load without a GPU. It
// has FAKE_CUDA_GPU_COUNT GPUs (default 2); every call succeeds, and a fill
// takes a millisecond.
//
// Thread-safety: as CUDA's, callable from any thread (no state).
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <thread>

extern "C" {

int cuInit(unsigned int) { return 0; }

int cuDeviceGetCount(int* count) {
  const char* env = std::getenv("FAKE_CUDA_GPU_COUNT");
  *count = env == nullptr ? 2 : std::atoi(env);
  return 0;
}

int cuDeviceGet(int* device, int ordinal) {
  *device = ordinal;
  return 0;
}

int cuDevicePrimaryCtxRetain(void** context, int device) {
  *context = reinterpret_cast<void*>(static_cast<intptr_t>(device) + 1);
  return 0;
}

int cuCtxSetCurrent(void*) { return 0; }

int cuMemAlloc_v2(uint64_t* pointer, size_t) {
  *pointer = 0x10000;
  return 0;
}

int cuMemsetD8_v2(uint64_t, unsigned char, size_t) {
  std::this_thread::sleep_for(std::chrono::milliseconds(1));
  return 0;
}

int cuCtxSynchronize() { return 0; }

}  // extern "C"
