// What hardware this host is, for the agent's inventory (proto
// AgentInventory): CPU model, packages and logical CPUs (/proc/cpuinfo),
// total memory (/proc/meminfo) and host name. The GPUs come from NVML
// (Nvml::Describe). Parsers are pure functions over the files' text, so
// tests run them on recorded fixtures.
//
// Thread-safety: pure functions; HostInventory reads files only.
#ifndef METRICS_CLIENT_HOST_INVENTORY_H_
#define METRICS_CLIENT_HOST_INVENTORY_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/vocabulary/signals.h"
#include "proto/metrics/v1/ingest.pb.h"

namespace metrics::client {

struct CpuInfo {
  std::string model;  // the first "model name" (x86) or "Model" (Arm) line
  int sockets = 0;    // distinct "physical id"s; 1 when the file has none
  int threads = 0;    // "processor" entries
};

absl::StatusOr<CpuInfo> ParseCpuInfo(absl::string_view text);
// MemTotal of /proc/meminfo, in bytes.
absl::StatusOr<int64_t> ParseMemTotalBytes(absl::string_view text);

// `text` as the inventory takes it: printable ASCII (any other byte, which
// could be a control character or invalid UTF-8 that no protobuf message
// may carry, becomes '?'), at most signals::kMaxInventoryText bytes: the
// vocabulary's bounds on an inventory, past which the server refuses it.
std::string InventoryText(absl::string_view text);

// The host's part of the inventory, from `proc_root`'s cpuinfo and
// meminfo; what cannot be read is left empty (a sampler error says why).
v1::AgentInventory HostInventory(const std::string& proc_root,
                                 const std::string& host_name,
                                 const std::string& agent_version);

}  // namespace metrics::client

#endif  // METRICS_CLIENT_HOST_INVENTORY_H_
