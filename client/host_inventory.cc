#include "client/host_inventory.h"

#include "absl/container/flat_hash_set.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "client/proc_stats.h"
#include "client/small_file.h"

namespace metrics::client {

namespace {

// "key : value" lines; the key without its padding.
bool KeyValue(absl::string_view line, absl::string_view& key,
              absl::string_view& value) {
  const size_t colon = line.find(':');
  if (colon == absl::string_view::npos) return false;
  key = absl::StripAsciiWhitespace(line.substr(0, colon));
  value = absl::StripAsciiWhitespace(line.substr(colon + 1));
  return true;
}


}  // namespace

std::string InventoryText(absl::string_view text) {
  std::string out(text.substr(0, signals::kMaxInventoryText));
  for (char& c : out) {
    const unsigned char u = static_cast<unsigned char>(c);
    if (u < 0x20 || u > 0x7e) c = '?';
  }
  return out;
}

absl::StatusOr<CpuInfo> ParseCpuInfo(absl::string_view text) {
  CpuInfo info;
  absl::flat_hash_set<std::string> packages;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    absl::string_view key, value;
    if (!KeyValue(line, key, value)) continue;
    if (key == "processor") {
      ++info.threads;
    } else if ((key == "model name" || key == "Model") && info.model.empty()) {
      info.model = std::string(value);
    } else if (key == "physical id") {
      packages.emplace(value);
    }
  }
  if (info.threads == 0) {
    return absl::InvalidArgumentError("/proc/cpuinfo: no \"processor\" entry");
  }
  info.sockets = packages.empty() ? 1 : static_cast<int>(packages.size());
  return info;
}

absl::StatusOr<int64_t> ParseMemTotalBytes(absl::string_view text) {
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    absl::string_view key, value;
    if (!KeyValue(line, key, value) || key != "MemTotal") continue;
    int64_t bytes = 0;
    if (!absl::ConsumeSuffix(&value, " kB") ||
        !KibibytesToBytes(value, &bytes)) {
      return absl::InvalidArgumentError(
          "/proc/meminfo: MemTotal is not a number of kB");
    }
    return bytes;
  }
  return absl::InvalidArgumentError("/proc/meminfo: no MemTotal line");
}

v1::AgentInventory HostInventory(const std::string& proc_root,
                                 const std::string& host_name,
                                 const std::string& agent_version) {
  v1::AgentInventory inventory;
  inventory.set_host_name(InventoryText(host_name));
  inventory.set_agent_version(InventoryText(agent_version));
  if (absl::StatusOr<CpuInfo> cpu = ParseCpuInfo(ReadSmallFile(proc_root + "/cpuinfo").value_or(""));
      cpu.ok()) {
    inventory.set_cpu_model(InventoryText(cpu->model));
    inventory.set_cpu_sockets(cpu->sockets);
    inventory.set_cpu_count(cpu->threads);
  }
  if (absl::StatusOr<int64_t> memory =
          ParseMemTotalBytes(ReadSmallFile(proc_root + "/meminfo").value_or(""));
      memory.ok()) {
    inventory.set_memory_total_bytes(*memory);
  }
  return inventory;
}

}  // namespace metrics::client
