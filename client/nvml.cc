#include "client/nvml.h"

#include <dlfcn.h>

#include <cstring>

#include "absl/strings/str_cat.h"
#include "client/nvml_abi.h"

namespace metrics::client {

namespace {

constexpr nvmlReturn_t kNvmlSuccess = 0;
constexpr unsigned int kUuidBufferSize = 96;

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

}  // namespace

absl::StatusOr<std::unique_ptr<Nvml>> Nvml::Load(const std::string& library) {
  void* handle = dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    return absl::UnavailableError(
        absl::StrCat("cannot load ", library, ": ", dlerror()));
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
    char uuid[kUuidBufferSize] = {};
    if (nvmlReturn_t r = nvml->api_->device_by_index(i, &device);
        r != kNvmlSuccess) {
      return absl::InternalError(absl::StrCat(
          "GPU ", i, ": ", nvml->api_->Error("nvmlDeviceGetHandleByIndex_v2", r)));
    }
    if (nvmlReturn_t r = nvml->api_->device_uuid(device, uuid, sizeof uuid);
        r != kNvmlSuccess) {
      return absl::InternalError(absl::StrCat(
          "GPU ", i, ": ", nvml->api_->Error("nvmlDeviceGetUUID", r)));
    }
    // NVML promises a NUL within the buffer; a library that breaks it must
    // not make us read past it.
    const size_t length = strnlen(uuid, sizeof uuid);
    if (length == sizeof uuid) {
      return absl::InternalError(absl::StrCat(
          "GPU ", i, ": nvmlDeviceGetUUID answered no NUL-terminated UUID"));
    }
    nvml->devices_.push_back(device);
    nvml->uuids_.emplace_back(uuid, length);
  }
  return nvml;
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
  for (size_t i = 0; i < devices_.size(); ++i) {
    nvmlUtilization_t utilization{};
    nvmlMemory_t memory{};
    nvmlReturn_t r = api_->utilization(devices_[i], &utilization);
    const char* call = "nvmlDeviceGetUtilizationRates";
    if (r == kNvmlSuccess) {
      r = api_->memory(devices_[i], &memory);
      call = "nvmlDeviceGetMemoryInfo";
    }
    if (r != kNvmlSuccess) {
      absl::StrAppend(&errors, errors.empty() ? "" : "; ", uuids_[i], ": ",
                      api_->Error(call, r));
      continue;
    }
    readings.push_back({&uuids_[i], static_cast<double>(utilization.gpu),
                        memory.free});
  }
  if (readings.empty() && !errors.empty()) {
    return absl::UnavailableError(errors);
  }
  return readings;
}

}  // namespace metrics::client
