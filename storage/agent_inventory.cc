#include "storage/agent_inventory.h"

#include <boost/json.hpp>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace metrics::storage {

namespace {

namespace json = boost::json;

absl::Status InvalidField(absl::string_view field, absl::string_view why) {
  return absl::InvalidArgumentError(absl::StrCat(field, ": ", why));
}

absl::Status CheckText(absl::string_view field, absl::string_view value) {
  if (value.size() > kMaxInventoryText) {
    return InvalidField(field, absl::StrCat("is ", value.size(),
                                       " bytes long; the limit is ",
                                       kMaxInventoryText));
  }
  for (size_t i = 0; i < value.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(value[i]);
    if (c < 0x20 || c == 0x7f) {
      return InvalidField(field, absl::StrCat("has a control character (byte ",
                                         static_cast<int>(c), ") at offset ",
                                         i));
    }
  }
  return absl::OkStatus();
}

absl::Status CheckCount(absl::string_view field, int64_t value) {
  return value < 0 ? InvalidField(field, absl::StrCat(value, " is negative"))
                   : absl::OkStatus();
}

std::string Text(const json::object& o, absl::string_view key) {
  const json::value* v = o.if_contains(json::string_view(key.data(), key.size()));
  if (v == nullptr || !v->is_string()) return "";
  return std::string(v->get_string());
}

int64_t Integer(const json::object& o, absl::string_view key) {
  const json::value* v = o.if_contains(json::string_view(key.data(), key.size()));
  if (v == nullptr) return 0;
  if (v->is_int64()) return v->get_int64();
  if (v->is_uint64()) return static_cast<int64_t>(v->get_uint64());
  return 0;
}

}  // namespace

bool GpuInventory::operator==(const GpuInventory& o) const {
  return index == o.index && uuid == o.uuid && name == o.name &&
         memory_total_bytes == o.memory_total_bytes &&
         mig_mode == o.mig_mode && mig_devices == o.mig_devices;
}

bool AgentInventory::operator==(const AgentInventory& o) const {
  return host_name == o.host_name && agent_version == o.agent_version &&
         cpu_model == o.cpu_model && cpu_sockets == o.cpu_sockets &&
         cpu_count == o.cpu_count &&
         memory_total_bytes == o.memory_total_bytes &&
         driver_version == o.driver_version &&
         cuda_version == o.cuda_version && gpus == o.gpus &&
         gpu_status == o.gpu_status && sampling == o.sampling;
}

absl::Status ValidateInventory(absl::string_view field,
                               const AgentInventory& inventory) {
  const auto f = [&](absl::string_view name) {
    return absl::StrCat(field, ".", name);
  };
  RETURN_IF_ERROR(CheckText(f("host_name"), inventory.host_name));
  RETURN_IF_ERROR(CheckText(f("agent_version"), inventory.agent_version));
  RETURN_IF_ERROR(CheckText(f("cpu_model"), inventory.cpu_model));
  RETURN_IF_ERROR(CheckCount(f("cpu_sockets"), inventory.cpu_sockets));
  RETURN_IF_ERROR(CheckCount(f("cpu_count"), inventory.cpu_count));
  RETURN_IF_ERROR(
      CheckCount(f("memory_total_bytes"), inventory.memory_total_bytes));
  RETURN_IF_ERROR(CheckText(f("driver_version"), inventory.driver_version));
  RETURN_IF_ERROR(CheckText(f("cuda_version"), inventory.cuda_version));
  RETURN_IF_ERROR(CheckText(f("gpu_status"), inventory.gpu_status));
  RETURN_IF_ERROR(CheckText(f("sampling"), inventory.sampling));
  if (inventory.gpus.size() > kMaxInventoryGpus) {
    return InvalidField(f("gpus"), absl::StrCat(inventory.gpus.size(),
                                           " GPUs is more than the limit of ",
                                           kMaxInventoryGpus));
  }
  for (size_t i = 0; i < inventory.gpus.size(); ++i) {
    const GpuInventory& gpu = inventory.gpus[i];
    const std::string g = absl::StrCat(field, ".gpus[", i, "]");
    RETURN_IF_ERROR(CheckCount(absl::StrCat(g, ".index"), gpu.index));
    RETURN_IF_ERROR(CheckText(absl::StrCat(g, ".uuid"), gpu.uuid));
    RETURN_IF_ERROR(CheckText(absl::StrCat(g, ".name"), gpu.name));
    RETURN_IF_ERROR(CheckCount(absl::StrCat(g, ".memory_total_bytes"),
                               gpu.memory_total_bytes));
    RETURN_IF_ERROR(CheckText(absl::StrCat(g, ".mig_mode"), gpu.mig_mode));
    if (gpu.mig_devices.size() > kMaxMigDevicesPerGpu) {
      return InvalidField(absl::StrCat(g, ".mig_devices"),
                     absl::StrCat(gpu.mig_devices.size(),
                                  " MIG devices is more than the limit of ",
                                  kMaxMigDevicesPerGpu));
    }
    for (size_t m = 0; m < gpu.mig_devices.size(); ++m) {
      RETURN_IF_ERROR(CheckText(absl::StrCat(g, ".mig_devices[", m, "]"),
                                gpu.mig_devices[m]));
    }
  }
  return absl::OkStatus();
}

std::string InventoryToJson(const AgentInventory& inventory) {
  json::array gpus;
  for (const GpuInventory& gpu : inventory.gpus) {
    json::array mig_devices;
    for (const std::string& m : gpu.mig_devices) mig_devices.emplace_back(m);
    gpus.push_back(json::object{{"index", gpu.index},
                                {"uuid", gpu.uuid},
                                {"name", gpu.name},
                                {"memoryTotalBytes", gpu.memory_total_bytes},
                                {"migMode", gpu.mig_mode},
                                {"migDevices", std::move(mig_devices)}});
  }
  json::object document{
      {"hostName", inventory.host_name},
      {"agentVersion", inventory.agent_version},
      {"cpuModel", inventory.cpu_model},
      {"cpuSockets", inventory.cpu_sockets},
      {"cpuCount", inventory.cpu_count},
      {"memoryTotalBytes", inventory.memory_total_bytes},
      {"driverVersion", inventory.driver_version},
      {"cudaVersion", inventory.cuda_version},
      {"gpus", std::move(gpus)},
      {"gpuStatus", inventory.gpu_status}};
  // Only where set, so one-reading agents' documents stay as they were.
  if (!inventory.sampling.empty()) document["sampling"] = inventory.sampling;
  return json::serialize(document);
}

absl::StatusOr<AgentInventory> InventoryFromJson(absl::string_view text) {
  json::error_code error;
  const json::value document =
      json::parse(json::string_view(text.data(), text.size()), error);
  if (error || !document.is_object()) {
    return absl::DataLossError("a stored agent inventory is no JSON object");
  }
  const json::object& o = document.get_object();
  AgentInventory inventory;
  inventory.host_name = Text(o, "hostName");
  inventory.agent_version = Text(o, "agentVersion");
  inventory.cpu_model = Text(o, "cpuModel");
  inventory.cpu_sockets = static_cast<int32_t>(Integer(o, "cpuSockets"));
  inventory.cpu_count = static_cast<int32_t>(Integer(o, "cpuCount"));
  inventory.memory_total_bytes = Integer(o, "memoryTotalBytes");
  inventory.driver_version = Text(o, "driverVersion");
  inventory.cuda_version = Text(o, "cudaVersion");
  inventory.gpu_status = Text(o, "gpuStatus");
  inventory.sampling = Text(o, "sampling");
  if (const json::value* gpus = o.if_contains("gpus");
      gpus != nullptr && gpus->is_array()) {
    for (const json::value& g : gpus->get_array()) {
      if (!g.is_object()) continue;
      const json::object& go = g.get_object();
      GpuInventory gpu;
      gpu.index = static_cast<int32_t>(Integer(go, "index"));
      gpu.uuid = Text(go, "uuid");
      gpu.name = Text(go, "name");
      gpu.memory_total_bytes = Integer(go, "memoryTotalBytes");
      gpu.mig_mode = Text(go, "migMode");
      if (const json::value* m = go.if_contains("migDevices");
          m != nullptr && m->is_array()) {
        for (const json::value& d : m->get_array()) {
          if (d.is_string()) gpu.mig_devices.emplace_back(d.get_string());
        }
      }
      inventory.gpus.push_back(std::move(gpu));
    }
  }
  return inventory;
}

}  // namespace metrics::storage
