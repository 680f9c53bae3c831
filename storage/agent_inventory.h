// What hardware an agent runs on (proto AgentInventory in ingest.proto): the
// store's type, its checks, and its stored form, a JSON document in the
// agent_inventories table (migration 0005) that an operator can read with
// SQL's jsonb operators. Keys are the proto's JSON names.
//
// Thread-safety: plain values and pure functions.
#ifndef METRICS_STORAGE_AGENT_INVENTORY_H_
#define METRICS_STORAGE_AGENT_INVENTORY_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/vocabulary/signals.h"

namespace metrics::storage {

// Inventory strings at most; GPUs at most (the signal vocabulary's bounds,
// which the clients clip to).
using signals::kMaxInventoryGpus;
using signals::kMaxInventoryText;
using signals::kMaxMigDevicesPerGpu;

struct GpuInventory {
  int32_t index = 0;
  std::string uuid;
  std::string name;
  int64_t memory_total_bytes = 0;
  std::string mig_mode;  // "enabled", "disabled" or "" (no MIG)
  std::vector<std::string> mig_devices;

  bool operator==(const GpuInventory& other) const;
};

struct AgentInventory {
  std::string host_name;
  std::string agent_version;
  std::string cpu_model;
  int32_t cpu_sockets = 0;
  int32_t cpu_count = 0;
  int64_t memory_total_bytes = 0;
  std::string driver_version;
  std::string cuda_version;
  std::vector<GpuInventory> gpus;
  std::string gpu_status;  // why there are no GPU readings; "" when fine
  // How the values were sampled where not one reading each ("" then).
  std::string sampling;

  bool operator==(const AgentInventory& other) const;
};

// An agent's inventory as a trial keeps it.
struct StoredInventory {
  int32_t trial_id = 0;
  std::string agent_id;
  AgentInventory inventory;
  int64_t received_at_us = 0;
};

// INVALID_ARGUMENT naming the field under `field` ("batch.inventory.gpus[2]
// .uuid: ..."): text longer than kMaxInventoryText or with control
// characters, a negative count, too many GPUs or MIG devices.
absl::Status ValidateInventory(absl::string_view field,
                               const AgentInventory& inventory);

// The stored JSON document, and back. Decoding ignores keys it does not
// know (a newer server's) and fails (DATA_LOSS) only on a document that is
// no JSON object.
std::string InventoryToJson(const AgentInventory& inventory);
absl::StatusOr<AgentInventory> InventoryFromJson(absl::string_view json);

}  // namespace metrics::storage

#endif  // METRICS_STORAGE_AGENT_INVENTORY_H_
