// A stand-in for NVIDIA's libnvidia-ml.so.1 with the entry points
// client/nvml.cc uses, so tests and benchmarks exercise the agent's GPU
// path on machines without GPUs. GPU i (from 0) has UUID
// "GPU-00000000-0000-0000-0000-00000000000<i>", utilisation 10 + 20 i
// percent (memory controller 5), 16 GiB of which (i + 1) GiB free, power
// 100 + 10 i W of a 300 W limit, 40 + i degrees, SM clock 1400 MHz, memory
// clock 2600 MHz, PCIe 1000 + i KB/s received and 500 sent, i corrected and
// 0 uncorrected ECC errors, throttle reasons 4 i. FAKE_NVML_GPU_COUNT sets
// the number of GPUs (default 2); FAKE_NVML_FAIL_INIT=1 makes nvmlInit_v2
// fail; FAKE_NVML_UUID_UNTERMINATED=1 fills the UUID buffer with no NUL;
// FAKE_NVML_UNSUPPORTED lists calls (comma-separated names) that answer
// NVML_ERROR_NOT_SUPPORTED. Every GPU is a "Fake GPU 16GB" with MIG
// disabled, on driver 550.54.15 for CUDA 12.4. FAKE_NVML_MIG lists GPU
// indexes (comma-separated) in MIG mode: such a GPU has no utilisation
// (NOT_SUPPORTED, as NVML answers) and MIG devices in slots 0 and 2 of 7
// ("MIG-00000000-0000-0000-0000-0000000<i>000<slot>", 8 GiB of which slot
// + 1 GiB used). FAKE_NVML_PROCESSES lists compute processes as
// "pid:MiB,..." that every GPU i runs, each using MiB × (i + 1) MiB.
// FAKE_NVML_LOST_AFTER=N makes GPU 0 answer
// NVML_ERROR_GPU_IS_LOST to every reading after its first N memory readings.
//
// Thread-safety: as NVML, callable from any thread (the state is constant
// but for an atomic count of readings).
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "client/nvml_abi.h"

namespace {

struct FakeDevice {
  unsigned int index;
  int mig_slot;  // -1 for a GPU
};

constexpr unsigned int kMaxGpus = 64;
constexpr unsigned int kMigSlots = 7;
FakeDevice devices[kMaxGpus];
FakeDevice mig_devices[kMaxGpus][kMigSlots];

unsigned int GpuCount() {
  const char* env = std::getenv("FAKE_NVML_GPU_COUNT");
  if (env == nullptr) return 2;
  const unsigned long n = std::strtoul(env, nullptr, 10);
  return n > kMaxGpus ? kMaxGpus : static_cast<unsigned int>(n);
}

constexpr int kSuccess = 0;
constexpr int kInvalidArgument = 2;
constexpr int kNotSupported = 3;
constexpr int kNotFound = 6;
constexpr int kGpuIsLost = 15;
constexpr int kUnknown = 999;

bool Unsupported(const char* call) {
  const char* list = std::getenv("FAKE_NVML_UNSUPPORTED");
  if (list == nullptr) return false;
  const size_t n = std::strlen(call);
  for (const char* p = std::strstr(list, call); p != nullptr;
       p = std::strstr(p + 1, call)) {
    const bool starts = p == list || p[-1] == ',';
    const bool ends = p[n] == '\0' || p[n] == ',';
    if (starts && ends) return true;
  }
  return false;
}

unsigned int Index(void* device) {
  return static_cast<FakeDevice*>(device)->index;
}

int MigSlot(void* device) { return static_cast<FakeDevice*>(device)->mig_slot; }

// Whether `list` (comma-separated numbers) holds `n`.
bool Listed(const char* list, unsigned int n) {
  if (list == nullptr) return false;
  for (const char* p = list; *p != '\0';) {
    char* end = nullptr;
    const unsigned long v = std::strtoul(p, &end, 10);
    if (end == p) return false;
    if (v == n) return true;
    p = *end == ',' ? end + 1 : end;
  }
  return false;
}

bool InMigMode(unsigned int gpu) { return Listed(std::getenv("FAKE_NVML_MIG"), gpu); }

// GPU 0 lost after FAKE_NVML_LOST_AFTER memory readings of it.
std::atomic<unsigned long> gpu0_memory_reads{0};
bool Lost(void* device) {
  const char* after = std::getenv("FAKE_NVML_LOST_AFTER");
  return after != nullptr && Index(device) == 0 && MigSlot(device) < 0 &&
         gpu0_memory_reads > std::strtoul(after, nullptr, 10);
}

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
  devices[index] = {index, -1};
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
  const int slot = MigSlot(device);
  if (slot >= 0) {
    std::snprintf(uuid, length, "MIG-00000000-0000-0000-0000-%08u%04d", i, slot);
  } else {
    std::snprintf(uuid, length, "GPU-00000000-0000-0000-0000-%012u", i);
  }
  return kSuccess;
}

int nvmlDeviceGetName(void*, char* name, unsigned int length) {
  if (Unsupported("nvmlDeviceGetName")) return kNotSupported;
  std::snprintf(name, length, "Fake GPU 16GB");
  return kSuccess;
}

int nvmlSystemGetDriverVersion(char* version, unsigned int length) {
  std::snprintf(version, length, "550.54.15");
  return kSuccess;
}

int nvmlSystemGetCudaDriverVersion_v2(int* version) {
  *version = 12040;
  return kSuccess;
}

int nvmlDeviceGetMigMode(void* device, unsigned int* current,
                         unsigned int* pending) {
  if (Unsupported("nvmlDeviceGetMigMode")) return kNotSupported;
  *current = *pending = InMigMode(Index(device)) ? 1 : 0;
  return kSuccess;
}

int nvmlDeviceGetMaxMigDeviceCount(void* device, unsigned int* count) {
  *count = InMigMode(Index(device)) ? kMigSlots : 0;
  return kSuccess;
}

int nvmlDeviceGetMigDeviceHandleByIndex(void* device, unsigned int slot,
                                        void** mig) {
  const unsigned int i = Index(device);
  if (!InMigMode(i) || slot >= kMigSlots) return kInvalidArgument;
  if (slot != 0 && slot != 2) return kNotFound;
  mig_devices[i][slot] = {i, static_cast<int>(slot)};
  *mig = &mig_devices[i][slot];
  return kSuccess;
}

int nvmlDeviceGetUtilizationRates(void* device, nvmlUtilization_t* u) {
  const unsigned int i = static_cast<FakeDevice*>(device)->index;
  if (Lost(device)) return kGpuIsLost;
  if (MigSlot(device) >= 0 || InMigMode(i)) return kNotSupported;
  u->gpu = 10 + 20 * i;
  u->memory = 5;
  return kSuccess;
}

int nvmlDeviceGetMemoryInfo(void* device, nvmlMemory_t* m) {
  const unsigned long long i = static_cast<FakeDevice*>(device)->index;
  if (i == 0 && MigSlot(device) < 0) ++gpu0_memory_reads;
  if (Lost(device)) return kGpuIsLost;
  if (const int slot = MigSlot(device); slot >= 0) {
    m->total = 8ULL << 30;
    m->used = static_cast<unsigned long long>(slot + 1) << 30;
    m->free = m->total - m->used;
    return kSuccess;
  }
  m->total = 16ULL << 30;
  m->free = (i + 1) << 30;
  m->used = m->total - m->free;
  return kSuccess;
}

int nvmlDeviceGetComputeRunningProcesses_v3(void* device, unsigned int* count,
                                            nvmlProcessInfo_t* infos) {
  if (Unsupported("nvmlDeviceGetComputeRunningProcesses_v3")) return kNotSupported;
  const char* list = std::getenv("FAKE_NVML_PROCESSES");
  unsigned int n = 0;
  for (const char* p = list; p != nullptr && *p != '\0';) {
    char* end = nullptr;
    const unsigned long pid = std::strtoul(p, &end, 10);
    if (*end != ':') break;
    const unsigned long long mib = std::strtoull(end + 1, &end, 10);
    if (n < *count) {
      infos[n] = {static_cast<unsigned int>(pid), (mib << 20) * (Index(device) + 1), 0, 0};
    }
    ++n;
    p = *end == ',' ? end + 1 : end;
  }
  const bool fits = n <= *count;
  *count = n;
  return fits ? kSuccess : 7;  // NVML_ERROR_INSUFFICIENT_SIZE
}

int nvmlDeviceGetPowerUsage(void* device, unsigned int* milliwatts) {
  if (Unsupported("nvmlDeviceGetPowerUsage")) return kNotSupported;
  *milliwatts = 100000 + 10000 * Index(device);
  return kSuccess;
}

int nvmlDeviceGetEnforcedPowerLimit(void*, unsigned int* milliwatts) {
  if (Unsupported("nvmlDeviceGetEnforcedPowerLimit")) return kNotSupported;
  *milliwatts = 300000;
  return kSuccess;
}

int nvmlDeviceGetTemperature(void* device, int sensor, unsigned int* celsius) {
  if (Unsupported("nvmlDeviceGetTemperature")) return kNotSupported;
  if (sensor != 0) return kInvalidArgument;
  *celsius = 40 + Index(device);
  return kSuccess;
}

int nvmlDeviceGetClockInfo(void*, int type, unsigned int* mhz) {
  if (Unsupported("nvmlDeviceGetClockInfo")) return kNotSupported;
  if (type != 1 && type != 2) return kInvalidArgument;
  *mhz = type == 1 ? 1400 : 2600;
  return kSuccess;
}

int nvmlDeviceGetPcieThroughput(void* device, int counter, unsigned int* kbps) {
  if (Unsupported("nvmlDeviceGetPcieThroughput")) return kNotSupported;
  if (counter != 0 && counter != 1) return kInvalidArgument;
  *kbps = counter == 1 ? 1000 + Index(device) : 500;
  return kSuccess;
}

int nvmlDeviceGetTotalEccErrors(void* device, int type, int counter,
                                unsigned long long* count) {
  if (Unsupported("nvmlDeviceGetTotalEccErrors")) return kNotSupported;
  if ((type != 0 && type != 1) || counter != 0) return kInvalidArgument;
  *count = type == 0 ? Index(device) : 0;
  return kSuccess;
}

int nvmlDeviceGetCurrentClocksThrottleReasons(void* device,
                                              unsigned long long* reasons) {
  if (Unsupported("nvmlDeviceGetCurrentClocksThrottleReasons")) {
    return kNotSupported;
  }
  *reasons = 4ULL * Index(device);
  return kSuccess;
}

}  // extern "C"
