// Fuzz target: metrics-agent's parsers of /proc files (stat, meminfo,
// diskstats, net/dev), which read whatever the kernel, or a container's
// fake /proc, writes. Any text may be refused; none may crash.
#include <cstddef>
#include <cstdint>

#include "absl/strings/string_view.h"
#include "client/proc_stats.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const absl::string_view text(reinterpret_cast<const char*>(data), size);
  (void)metrics::client::ParseProcStat(text);
  (void)metrics::client::ParseMemAvailableBytes(text);
  (void)metrics::client::ParseDiskStats(text);
  (void)metrics::client::ParseNetDev(text);
  return 0;
}
