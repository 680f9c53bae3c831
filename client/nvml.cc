#include "client/nvml.h"

#include <dlfcn.h>

#include <algorithm>
#include <cstring>
#include <iterator>

#include "absl/strings/str_cat.h"
#include "client/host_inventory.h"
#include "client/nvml_abi.h"
#include "common/vocabulary/signals.h"

namespace metrics::client {

namespace {

constexpr nvmlReturn_t kNvmlSuccess = 0;
constexpr nvmlReturn_t kNvmlNotSupported = 3;
constexpr nvmlReturn_t kNvmlNotFound = 6;
constexpr nvmlReturn_t kNvmlInsufficientSize = 7;
constexpr unsigned long long kNvmlValueNotAvailable = ~0ULL;
constexpr nvmlReturn_t kNvmlFunctionNotFound = 13;
constexpr unsigned int kUuidBufferSize = 96;
constexpr unsigned int kNameBufferSize = 96;
constexpr unsigned int kVersionBufferSize = 80;
constexpr unsigned int kMigEnabled = 1;
// MIG slots asked at most per GPU (NVML's GPUs have 7); a library answering
// more is not believed.
constexpr unsigned int kMaxMigSlots = 16;

using UintGetter = nvmlReturn_t (*)(nvmlDevice_t, unsigned int*);

constexpr size_t kOptionalSignals = std::size(signals::kOptionalNvmlSignals);
static_assert(kOptionalSignals <= 32, "one bit per signal in unsupported_");

}  // namespace

struct Nvml::Api {
  nvmlReturn_t (*init)();
  nvmlReturn_t (*shutdown)();
  const char* (*error_string)(nvmlReturn_t);
  nvmlReturn_t (*device_count)(unsigned int*);
  nvmlReturn_t (*device_by_index)(unsigned int, nvmlDevice_t*);
  nvmlReturn_t (*device_uuid)(nvmlDevice_t, char*, unsigned int);
  nvmlReturn_t (*utilization)(nvmlDevice_t, nvmlUtilization_t*);
  nvmlReturn_t (*memory)(nvmlDevice_t, nvmlMemory_t*);
  // The optional signals' calls, by their index in the vocabulary's
  // table: null when the library lacks one (an old driver); its signal is
  // then unsupported on every GPU.
  void* optional[kOptionalSignals] = {};
  // For the inventory and MIG.
  nvmlReturn_t (*device_name)(nvmlDevice_t, char*, unsigned int) = nullptr;
  nvmlReturn_t (*driver_version)(char*, unsigned int) = nullptr;
  nvmlReturn_t (*cuda_version)(int*) = nullptr;
  nvmlReturn_t (*mig_mode)(nvmlDevice_t, unsigned int*, unsigned int*) = nullptr;
  UintGetter max_mig_devices = nullptr;
  nvmlReturn_t (*mig_device)(nvmlDevice_t, unsigned int, nvmlDevice_t*) = nullptr;
  nvmlReturn_t (*processes)(nvmlDevice_t, unsigned int*, nvmlProcessInfo_t*) = nullptr;

  std::string Error(const char* call, nvmlReturn_t r) const {
    const char* text = error_string(r);
    return absl::StrCat(call, " failed: ", text != nullptr ? text : "error",
                        " (", r, ")");
  }
};

namespace {

template <typename F>
bool Bind(void* handle, const char* name, F*& f) {
  f = reinterpret_cast<F*>(dlsym(handle, name));
  return f != nullptr;
}

template <typename F, typename... Args>
nvmlReturn_t CallOptional(F* f, Args... args) {
  return f == nullptr ? kNvmlFunctionNotFound : f(args...);
}

// Calls optional signal `signal` through `f` (its call, of the shape the
// table gives) and scales its answer to the signal's unit.
nvmlReturn_t ReadOptional(void* f, nvmlDevice_t d,
                          const signals::OptionalNvmlSignal& signal, double* out) {
  if (f == nullptr) return kNvmlFunctionNotFound;
  unsigned int narrow = 0;
  unsigned long long wide = 0;
  nvmlReturn_t r = kNvmlFunctionNotFound;
  const int* a = signal.args;
  // make_signals.py admits these four shapes only.
  switch (signal.arg_count * 2 + (signal.wide ? 1 : 0)) {
    case 0:
      r = reinterpret_cast<nvmlReturn_t (*)(nvmlDevice_t, unsigned int*)>(f)(d, &narrow);
      break;
    case 1:
      r = reinterpret_cast<nvmlReturn_t (*)(nvmlDevice_t, unsigned long long*)>(f)(d, &wide);
      break;
    case 2:
      r = reinterpret_cast<nvmlReturn_t (*)(nvmlDevice_t, int, unsigned int*)>(f)(d, a[0],
                                                                                &narrow);
      break;
    case 5:
      r = reinterpret_cast<nvmlReturn_t (*)(nvmlDevice_t, int, int, unsigned long long*)>(f)(
          d, a[0], a[1], &wide);
      break;
    default:
      return kNvmlFunctionNotFound;
  }
  *out = (signal.wide ? static_cast<double>(wide) : static_cast<double>(narrow)) * signal.scale;
  return r;
}

}  // namespace

absl::StatusOr<std::unique_ptr<Nvml>> Nvml::Load(const std::string& library) {
  void* handle = dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const std::string error = dlerror();
    // The usual case (no NVIDIA driver) in the words a user searches for.
    if (error.find("No such file or directory") != std::string::npos) {
      return absl::UnavailableError(absl::StrCat(library, " not found"));
    }
    return absl::UnavailableError(
        absl::StrCat("cannot load ", library, ": ", error));
  }
  auto api = std::make_unique<Api>();
  for (auto [name, ok] : {
           std::pair{"nvmlInit_v2", Bind(handle, "nvmlInit_v2", api->init)},
           {"nvmlShutdown", Bind(handle, "nvmlShutdown", api->shutdown)},
           {"nvmlErrorString", Bind(handle, "nvmlErrorString", api->error_string)},
           {"nvmlDeviceGetCount_v2",
            Bind(handle, "nvmlDeviceGetCount_v2", api->device_count)},
           {"nvmlDeviceGetHandleByIndex_v2",
            Bind(handle, "nvmlDeviceGetHandleByIndex_v2", api->device_by_index)},
           {"nvmlDeviceGetUUID", Bind(handle, "nvmlDeviceGetUUID", api->device_uuid)},
           {"nvmlDeviceGetUtilizationRates",
            Bind(handle, "nvmlDeviceGetUtilizationRates", api->utilization)},
           {"nvmlDeviceGetMemoryInfo",
            Bind(handle, "nvmlDeviceGetMemoryInfo", api->memory)},
       }) {
    if (!ok) {
      dlclose(handle);
      return absl::UnavailableError(
          absl::StrCat(library, " has no ", name, " (not NVML?)"));
    }
  }
  // Optional entry points; a missing one leaves its signals unsupported.
  for (size_t k = 0; k < kOptionalSignals; ++k) {
    api->optional[k] = dlsym(handle, signals::kOptionalNvmlSignals[k].call);
  }
  Bind(handle, "nvmlDeviceGetName", api->device_name);
  Bind(handle, "nvmlSystemGetDriverVersion", api->driver_version);
  if (!Bind(handle, "nvmlSystemGetCudaDriverVersion_v2", api->cuda_version)) {
    Bind(handle, "nvmlSystemGetCudaDriverVersion", api->cuda_version);
  }
  Bind(handle, "nvmlDeviceGetMigMode", api->mig_mode);
  Bind(handle, "nvmlDeviceGetMaxMigDeviceCount", api->max_mig_devices);
  Bind(handle, "nvmlDeviceGetMigDeviceHandleByIndex", api->mig_device);
  if (!Bind(handle, "nvmlDeviceGetComputeRunningProcesses_v3", api->processes)) {
    Bind(handle, "nvmlDeviceGetComputeRunningProcesses_v2", api->processes);
  }
  if (nvmlReturn_t r = api->init(); r != kNvmlSuccess) {
    const std::string error = api->Error("nvmlInit_v2", r);
    dlclose(handle);
    return absl::InternalError(error);
  }
  std::unique_ptr<Nvml> nvml(new Nvml(handle, std::move(api)));
  unsigned int count = 0;
  if (nvmlReturn_t r = nvml->api_->device_count(&count); r != kNvmlSuccess) {
    return absl::InternalError(nvml->api_->Error("nvmlDeviceGetCount_v2", r));
  }
  for (unsigned int i = 0; i < count; ++i) {
    nvmlDevice_t device = nullptr;
    if (nvmlReturn_t r = nvml->api_->device_by_index(i, &device);
        r != kNvmlSuccess) {
      return absl::InternalError(absl::StrCat(
          "GPU ", i, ": ", nvml->api_->Error("nvmlDeviceGetHandleByIndex_v2", r)));
    }
    absl::StatusOr<std::string> uuid = nvml->Uuid(device);
    if (!uuid.ok()) {
      return absl::InternalError(absl::StrCat("GPU ", i, ": ", uuid.status().message()));
    }
    nvml->devices_.push_back(device);
    nvml->uuids_.push_back(*std::move(uuid));
    nvml->unsupported_.push_back(0);
    nvml->FindMigDevices(nvml->devices_.size() - 1);
  }
  return nvml;
}

absl::StatusOr<std::string> Nvml::Uuid(nvmlDevice_t device) const {
  char uuid[kUuidBufferSize] = {};
  if (nvmlReturn_t r = api_->device_uuid(device, uuid, sizeof uuid);
      r != kNvmlSuccess) {
    return absl::InternalError(api_->Error("nvmlDeviceGetUUID", r));
  }
  // NVML promises a NUL within the buffer; a library that breaks it must
  // not make us read past it.
  const size_t length = strnlen(uuid, sizeof uuid);
  if (length == sizeof uuid) {
    return absl::InternalError("nvmlDeviceGetUUID answered no NUL-terminated UUID");
  }
  return std::string(uuid, length);
}

// A GPU's MIG mode, and its MIG devices when it is on. A GPU or library
// without MIG has mode "".
void Nvml::FindMigDevices(size_t gpu) {
  unsigned int current = 0, pending = 0;
  std::string& mode = mig_modes_.emplace_back();
  if (CallOptional(api_->mig_mode, devices_[gpu], &current, &pending) !=
      kNvmlSuccess) {
    return;
  }
  mode = current == kMigEnabled ? "enabled" : "disabled";
  unsigned int slots = 0;
  if (current != kMigEnabled || api_->mig_device == nullptr ||
      CallOptional(api_->max_mig_devices, devices_[gpu], &slots) !=
          kNvmlSuccess) {
    return;
  }
  int found = 0;
  for (unsigned int slot = 0; slot < std::min(slots, kMaxMigSlots) &&
                              static_cast<size_t>(found) < signals::kMaxMigDevicesPerGpu;
       ++slot) {
    nvmlDevice_t mig = nullptr;
    const nvmlReturn_t r = api_->mig_device(devices_[gpu], slot, &mig);
    if (r == kNvmlNotFound) continue;  // an empty slot
    if (r != kNvmlSuccess) {
      notes_.push_back(absl::StrCat(
          uuids_[gpu], ": MIG device ", slot, " left out (",
          api_->Error("nvmlDeviceGetMigDeviceHandleByIndex", r), ")"));
      continue;
    }
    absl::StatusOr<std::string> uuid = Uuid(mig);
    if (!uuid.ok()) {
      notes_.push_back(absl::StrCat(uuids_[gpu], ": MIG device ", slot,
                                    " left out (", uuid.status().message(),
                                    ")"));
      continue;
    }
    mig_devices_.push_back(mig);
    mig_uuids_.push_back(*std::move(uuid));
    mig_parents_.push_back(gpu);
    ++found;
  }
}

void Nvml::Describe(v1::AgentInventory& inventory) const {
  char text[kVersionBufferSize] = {};
  if (CallOptional(api_->driver_version, text, kVersionBufferSize) ==
      kNvmlSuccess) {
    inventory.set_driver_version(
        InventoryText(absl::string_view(text, strnlen(text, sizeof text))));
  }
  int cuda = 0;
  if (CallOptional(api_->cuda_version, &cuda) == kNvmlSuccess && cuda > 0) {
    // NVML's 1000 * major + 10 * minor.
    inventory.set_cuda_version(absl::StrCat(cuda / 1000, ".", cuda % 1000 / 10));
  }
  for (size_t i = 0;
       i < std::min(devices_.size(), signals::kMaxInventoryGpus); ++i) {
    v1::GpuInventory* gpu = inventory.add_gpus();
    gpu->set_index(static_cast<int32_t>(i));
    gpu->set_uuid(InventoryText(uuids_[i]));
    char name[kNameBufferSize] = {};
    if (CallOptional(api_->device_name, devices_[i], name, kNameBufferSize) ==
        kNvmlSuccess) {
      gpu->set_name(InventoryText(absl::string_view(name, strnlen(name, sizeof name))));
    }
    nvmlMemory_t memory{};
    if (api_->memory(devices_[i], &memory) == kNvmlSuccess) {
      gpu->set_memory_total_bytes(static_cast<int64_t>(memory.total));
    }
    gpu->set_mig_mode(mig_modes_[i]);
    for (size_t m = 0; m < mig_uuids_.size(); ++m) {
      if (mig_parents_[m] == i) gpu->add_mig_devices(InventoryText(mig_uuids_[m]));
    }
  }
}

Nvml::Nvml(void* handle, std::unique_ptr<Api> api)
    : handle_(handle), api_(std::move(api)) {}

Nvml::~Nvml() {
  api_->shutdown();
  dlclose(handle_);
}

absl::StatusOr<std::vector<GpuReading>> Nvml::Read() {
  std::vector<GpuReading> readings;
  std::string errors;
  const auto fail = [&](const std::string& uuid, const char* call,
                        nvmlReturn_t r) {
    absl::StrAppend(&errors, errors.empty() ? "" : "; ", uuid, ": ",
                    api_->Error(call, r));
  };
  // A device's reading with its memory; a GPU's other signals follow.
  const auto add = [&](const std::string& uuid,
                       const nvmlMemory_t& memory) -> GpuReading& {
    GpuReading& reading = readings.emplace_back();
    reading.uuid = &uuid;
    reading.free_memory_bytes = memory.free;
    reading.values = {
        {signals::kGpuMemoryUsed.name, signals::kGpuMemoryUsed.unit,
         static_cast<double>(memory.used)},
        {signals::kGpuMemoryTotal.name, signals::kGpuMemoryTotal.unit,
         static_cast<double>(memory.total)}};
    return reading;
  };
  for (size_t i = 0; i < devices_.size(); ++i) {
    nvmlMemory_t memory{};
    nvmlUtilization_t utilization{};
    if (nvmlReturn_t r = api_->memory(devices_[i], &memory); r != kNvmlSuccess) {
      fail(uuids_[i], "nvmlDeviceGetMemoryInfo", r);
      continue;
    }
    // A GPU in MIG mode has no utilisation of its own (NOT_SUPPORTED).
    const nvmlReturn_t u = api_->utilization(devices_[i], &utilization);
    if (u != kNvmlSuccess && u != kNvmlNotSupported) {
      fail(uuids_[i], "nvmlDeviceGetUtilizationRates", u);
      continue;
    }
    GpuReading& reading = add(uuids_[i], memory);
    if (u == kNvmlSuccess) {
      reading.utilization_percent = utilization.gpu;
      reading.values.push_back({signals::kGpuMemoryUtil.name, signals::kGpuMemoryUtil.unit,
                                static_cast<double>(utilization.memory)});
    }
    ReadSignals(i, reading);
  }
  for (size_t m = 0; m < mig_devices_.size(); ++m) {
    nvmlMemory_t memory{};
    if (nvmlReturn_t r = api_->memory(mig_devices_[m], &memory);
        r != kNvmlSuccess) {
      fail(mig_uuids_[m], "nvmlDeviceGetMemoryInfo", r);
      continue;
    }
    add(mig_uuids_[m], memory);
  }
  if (readings.empty() && !errors.empty()) {
    return absl::UnavailableError(errors);
  }
  return readings;
}

void Nvml::ReadSignals(size_t device, GpuReading& reading) {
  for (size_t k = 0; k < kOptionalSignals; ++k) {
    if (unsupported_[device] & (uint32_t{1} << k)) continue;
    const signals::OptionalNvmlSignal& signal = signals::kOptionalNvmlSignals[k];
    double value = 0;
    const nvmlReturn_t r = ReadOptional(api_->optional[k], devices_[device], signal, &value);
    if (r == kNvmlSuccess) {
      reading.values.push_back({signal.signal.name, signal.signal.unit, value});
    } else if (r == kNvmlNotSupported || r == kNvmlFunctionNotFound) {
      // Asked once: a GPU does not start supporting a signal later.
      unsupported_[device] |= uint32_t{1} << k;
      notes_.push_back(absl::StrCat(uuids_[device], ": ", signal.signal.name,
                                    " is not supported (",
                                    api_->Error(signal.call, r),
                                    "); not reported"));
    }
    // Another error (the GPU busy, lost) leaves this sample without it.
  }
}

std::vector<std::optional<std::vector<Nvml::GpuProcess>>>
Nvml::ComputeProcesses() {
  processes_unsupported_.resize(devices_.size(), false);
  std::vector<std::optional<std::vector<GpuProcess>>> processes(devices_.size());
  std::vector<nvmlProcessInfo_t> infos;
  for (size_t i = 0; i < devices_.size(); ++i) {
    if (processes_unsupported_[i]) continue;
    unsigned int count = 64;
    nvmlReturn_t r = kNvmlInsufficientSize;
    // Processes may start between the two calls: ask again, once, with room.
    for (int attempt = 0; attempt < 2 && r == kNvmlInsufficientSize; ++attempt) {
      count = std::min(count + 16, 4096u);
      infos.assign(count, nvmlProcessInfo_t{});
      r = CallOptional(api_->processes, devices_[i], &count, infos.data());
    }
    if (r == kNvmlNotSupported || r == kNvmlFunctionNotFound) {
      processes_unsupported_[i] = true;
      notes_.push_back(absl::StrCat(
          uuids_[i], ": process_gpu_memory is not supported (",
          api_->Error("nvmlDeviceGetComputeRunningProcesses", r),
          "); not reported"));
      continue;
    }
    if (r != kNvmlSuccess) continue;  // this sample goes without it
    std::vector<GpuProcess>& on_gpu = processes[i].emplace();
    for (unsigned int p = 0; p < std::min<size_t>(count, infos.size()); ++p) {
      GpuProcess& process = on_gpu.emplace_back();
      process.pid = infos[p].pid;
      if (infos[p].usedGpuMemory != kNvmlValueNotAvailable) {
        process.used_memory_bytes = infos[p].usedGpuMemory;
      }
    }
  }
  return processes;
}

std::vector<std::optional<uint64_t>> Nvml::ProcessMemory(
    const absl::flat_hash_set<int>& pids) {
  std::vector<std::optional<uint64_t>> used(devices_.size());
  std::vector<std::optional<std::vector<GpuProcess>>> processes =
      ComputeProcesses();
  for (size_t i = 0; i < processes.size(); ++i) {
    if (!processes[i].has_value()) continue;
    uint64_t bytes = 0;
    for (const GpuProcess& process : *processes[i]) {
      if (pids.contains(static_cast<int>(process.pid))) {
        bytes += process.used_memory_bytes.value_or(0);
      }
    }
    used[i] = bytes;
  }
  return used;
}

std::vector<std::string> Nvml::TakeNotes() {
  std::vector<std::string> notes;
  notes.swap(notes_);
  return notes;
}

}  // namespace metrics::client
