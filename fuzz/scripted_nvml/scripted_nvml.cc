// A stand-in for NVIDIA's libnvidia-ml.so.1 whose every answer comes from a
// script of bytes (the fuzz input of fuzz/nvml_answers_fuzz.cc): each call
// takes a byte saying success or which error, then the bytes of what it
// writes back, copied as they come (a UUID need not end in NUL, a count may
// be huge, an error string may be missing). When the script runs out every
// call fails, so no answer is ever made up.
//
// Thread-safety: none; one fuzzing thread sets a script, then calls.
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "client/nvml_abi.h"

namespace {

const uint8_t* script = nullptr;
size_t script_left = 0;
char error_text[64];

constexpr int kSuccess = 0;
constexpr int kUnknown = 999;

bool Take(void* out, size_t n) {
  if (script_left < n) {
    script_left = 0;
    return false;
  }
  std::memcpy(out, script, n);
  script += n;
  script_left -= n;
  return true;
}

// Bytes below 192 mean success; others are NVML's error codes 1..63.
int Status() {
  uint8_t b = 0;
  if (!Take(&b, 1)) return kUnknown;
  return b < 192 ? kSuccess : b - 191;
}

// An answer of `n` bytes into `out`, or the call's error.
int Answer(void* out, size_t n) {
  const int status = Status();
  if (status != kSuccess) return status;
  return Take(out, n) ? kSuccess : kUnknown;
}

}  // namespace

extern "C" {

void ScriptedNvmlSet(const uint8_t* data, size_t size) {
  script = data;
  script_left = size;
}

int nvmlInit_v2() { return Status(); }
int nvmlShutdown() { return Status(); }

// No string, a fixed one, or up to 63 bytes of the script.
const char* nvmlErrorString(int) {
  uint8_t kind = 0;
  if (!Take(&kind, 1) || kind % 3 == 0) return nullptr;
  if (kind % 3 == 1) return "Unknown Error";
  uint8_t length = 0;
  Take(&length, 1);
  length %= sizeof error_text;
  std::memset(error_text, 0, sizeof error_text);
  Take(error_text, length);
  return error_text;
}

int nvmlDeviceGetCount_v2(unsigned int* count) {
  return Answer(count, sizeof *count);
}

int nvmlDeviceGetHandleByIndex_v2(unsigned int, void** device) {
  return Answer(device, sizeof *device);
}

int nvmlDeviceGetUUID(void*, char* uuid, unsigned int length) {
  return Answer(uuid, length);
}

int nvmlDeviceGetUtilizationRates(void*, nvmlUtilization_t* utilization) {
  return Answer(utilization, sizeof *utilization);
}

int nvmlDeviceGetMemoryInfo(void*, nvmlMemory_t* memory) {
  return Answer(memory, sizeof *memory);
}

int nvmlDeviceGetPowerUsage(void*, unsigned int* milliwatts) {
  return Answer(milliwatts, sizeof *milliwatts);
}

int nvmlDeviceGetEnforcedPowerLimit(void*, unsigned int* milliwatts) {
  return Answer(milliwatts, sizeof *milliwatts);
}

int nvmlDeviceGetTemperature(void*, int, unsigned int* celsius) {
  return Answer(celsius, sizeof *celsius);
}

int nvmlDeviceGetClockInfo(void*, int, unsigned int* mhz) {
  return Answer(mhz, sizeof *mhz);
}

int nvmlDeviceGetPcieThroughput(void*, int, unsigned int* kbps) {
  return Answer(kbps, sizeof *kbps);
}

int nvmlDeviceGetTotalEccErrors(void*, int, int, unsigned long long* count) {
  return Answer(count, sizeof *count);
}

int nvmlDeviceGetCurrentClocksThrottleReasons(void*, unsigned long long* reasons) {
  return Answer(reasons, sizeof *reasons);
}

int nvmlDeviceGetName(void*, char* name, unsigned int length) {
  return Answer(name, length);
}

int nvmlSystemGetDriverVersion(char* version, unsigned int length) {
  return Answer(version, length);
}

int nvmlSystemGetCudaDriverVersion_v2(int* version) {
  return Answer(version, sizeof *version);
}

int nvmlDeviceGetMigMode(void*, unsigned int* current, unsigned int* pending) {
  const int status = Answer(current, sizeof *current);
  return status == kSuccess ? Answer(pending, sizeof *pending) : status;
}

int nvmlDeviceGetMaxMigDeviceCount(void*, unsigned int* count) {
  return Answer(count, sizeof *count);
}

// A status, the number of processes, then as many of them as fit.
int nvmlDeviceGetComputeRunningProcesses_v3(void*, unsigned int* count,
                                            nvmlProcessInfo_t* infos) {
  const unsigned int room = *count;
  const int status = Status();
  unsigned int n = 0;
  if (!Take(&n, sizeof n)) return kUnknown;
  *count = n;
  if (status != kSuccess) return status;
  for (unsigned int i = 0; i < n && i < room; ++i) {
    if (!Take(&infos[i], sizeof infos[i])) return kUnknown;
  }
  return kSuccess;
}

int nvmlDeviceGetMigDeviceHandleByIndex(void*, unsigned int, void** mig) {
  return Answer(mig, sizeof *mig);
}

}  // extern "C"
