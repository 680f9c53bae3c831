#include "storage/legacy_profiler.h"

#include "common/vocabulary/signals.h"
#include "storage/metric_store.h"

namespace metrics::storage {

namespace {

struct SystemName {
  absl::string_view legacy;
  signals::Signal stored;
  double scale;
};

// 10^9 and 10^9/8 have 21 significant bits, so a float (24 bits) times
// either is exact in a double (53 bits), and dividing gives the float back.
constexpr double kGiga = 1e9;
constexpr double kGigabitInBytes = 1e9 / 8;

constexpr SystemName kSystemNames[] = {
    {"gpu_util", signals::kGpuUtil, 1},
    {"gpu_free_memory", signals::kGpuFreeMemory, 1},
    {"cpu_util_simple", signals::kCpuUtilSimple, 1},
    {"free_memory", signals::kMemoryFree, kGiga},
    {"disk_iops", signals::kDiskIops, 1},
    {"disk_throughput_read", signals::kDiskThroughputRead, 1},
    {"disk_throughput_write", signals::kDiskThroughputWrite, 1},
    {"net_throughput_sent", signals::kNetThroughputSent, kGigabitInBytes},
    {"net_throughput_recv", signals::kNetThroughputRecv, kGigabitInBytes},
};

}  // namespace

std::optional<std::string> GroupOfLegacyType(absl::string_view type) {
  if (type == kLegacySystemType) return std::string(kSystemGroup);
  if (type == kLegacyTimingType) return std::string(kTimingGroup);
  if (type == kLegacyMiscType) return std::string(kMiscGroup);
  return std::nullopt;
}

std::string LegacyTypeOfGroup(absl::string_view group) {
  if (group == kTimingGroup) return std::string(kLegacyTimingType);
  if (group == kMiscGroup) return std::string(kLegacyMiscType);
  return std::string(kLegacySystemType);
}

StoredName FromLegacy(absl::string_view group, absl::string_view legacy_name) {
  if (group == kSystemGroup) {
    for (const SystemName& n : kSystemNames) {
      if (n.legacy == legacy_name) {
        return {std::string(n.stored.name), std::string(n.stored.unit), n.scale};
      }
    }
  }
  return {std::string(legacy_name), "", 1};
}

StoredName ToLegacy(absl::string_view group, absl::string_view name) {
  if (group == kSystemGroup) {
    for (const SystemName& n : kSystemNames) {
      if (n.stored.name == name) {
        return {std::string(n.legacy), std::string(n.stored.unit), n.scale};
      }
    }
  }
  return {std::string(name), "", 1};
}

}  // namespace metrics::storage
