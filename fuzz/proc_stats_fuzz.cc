// Fuzz target: metrics-agent's parsers of /proc files (stat, meminfo,
// diskstats, net/dev, cpuinfo, a process's stat) and cgroup files (cpu.max,
// cpu.stat, CPU lists, memory limits), which read whatever the kernel, or a
// container's fake /proc, writes. Any text may be refused; none may crash.
#include <cstddef>
#include <cstdint>

#include "absl/strings/string_view.h"
#include "client/cgroup.h"
#include "client/host_inventory.h"
#include "client/job_sampler.h"
#include "client/proc_stats.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const absl::string_view text(reinterpret_cast<const char*>(data), size);
  (void)metrics::client::ParseProcStat(text);
  (void)metrics::client::ParseMemAvailableBytes(text);
  (void)metrics::client::ParseDiskStats(text);
  (void)metrics::client::ParseNetDev(text);
  (void)metrics::client::ParseCpuInfo(text);
  (void)metrics::client::ParseMemTotalBytes(text);
  (void)metrics::client::ParseProcessStat(text);
  (void)metrics::client::ParseCpuMax(text);
  (void)metrics::client::ParseCpuStatUsageMicros(text);
  (void)metrics::client::CountCpuList(text);
  (void)metrics::client::ParseMemoryLimit(text);
  (void)metrics::client::CountCpusInProcStat(text);
  const std::string printable = metrics::client::InventoryText(text);
  if (printable.size() > metrics::signals::kMaxInventoryText) __builtin_trap();
  return 0;
}
