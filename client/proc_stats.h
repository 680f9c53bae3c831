// Parsers of the Linux /proc files metrics-agent samples, and the counter
// arithmetic that turns two readings into a rate. Pure functions over the
// files' text, so tests run them on recorded fixtures.
//
// Thread-safety: pure functions.
#ifndef METRICS_CLIENT_PROC_STATS_H_
#define METRICS_CLIENT_PROC_STATS_H_

#include <cstdint>
#include <optional>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace metrics::client {

// Jiffies of all CPUs together since boot (/proc/stat's "cpu" line).
struct CpuTimes {
  uint64_t busy = 0;   // everything but idle and iowait
  uint64_t total = 0;  // including idle and iowait
};
absl::StatusOr<CpuTimes> ParseProcStat(absl::string_view text);

// MemAvailable of /proc/meminfo, in bytes: what can be allocated without
// swapping, the kernel's own estimate.
absl::StatusOr<int64_t> ParseMemAvailableBytes(absl::string_view text);

// A /proc count of kB (KiB) as bytes: false for anything but a non-negative
// number whose bytes fit in int64_t (a corrupt or hostile file must not
// overflow the multiplication).
bool KibibytesToBytes(absl::string_view kib_text, int64_t* bytes);

// Completed I/Os and sectors (of 512 bytes, whatever the device's sector
// size) of one block device.
struct DiskCounters {
  uint64_t reads = 0;
  uint64_t read_sectors = 0;
  uint64_t writes = 0;
  uint64_t write_sectors = 0;
};
// /proc/diskstats, whole disks only, by device name. Left out: partitions
// (a name that is another listed device's name plus a number, optionally
// after "p": sda1, nvme0n1p2, mmcblk0p1) and virtual devices that would
// count the same I/O twice or are not disks (loop, ram, zram, dm-, md).
absl::StatusOr<absl::flat_hash_map<std::string, DiskCounters>> ParseDiskStats(
    absl::string_view text);

struct NetCounters {
  uint64_t received_bytes = 0;
  uint64_t sent_bytes = 0;
};
// /proc/net/dev by interface, without loopback ("lo").
absl::StatusOr<absl::flat_hash_map<std::string, NetCounters>> ParseNetDev(
    absl::string_view text);

// How much a counter grew from `previous` to `current`. A counter that went
// down wrapped if it was 32 bits wide (some drivers and older kernels keep
// 32-bit counters), else it was reset (a device removed and added again):
// nullopt, since the growth is unknown.
std::optional<uint64_t> CounterDelta(uint64_t previous, uint64_t current);

}  // namespace metrics::client

#endif  // METRICS_CLIENT_PROC_STATS_H_
