#include "client/proc_stats.h"

#include <algorithm>
#include <iterator>
#include <limits>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/vocabulary/signals.h"

namespace metrics::client {

namespace {

std::vector<absl::string_view> Fields(absl::string_view line) {
  return absl::StrSplit(line, absl::ByAnyChar(" \t"), absl::SkipEmpty());
}

bool ParseCounter(absl::string_view field, uint64_t* out) {
  return absl::SimpleAtoi(field, out);
}

bool IsVirtualDisk(absl::string_view name) {
  for (absl::string_view prefix : {"loop", "ram", "zram", "dm-", "md"}) {
    if (absl::StartsWith(name, prefix)) return true;
  }
  return false;
}

// True when `name` is `disk` followed by digits, or by "p" and digits.
bool IsPartitionOf(absl::string_view name, absl::string_view disk) {
  if (!absl::ConsumePrefix(&name, disk)) return false;
  absl::ConsumePrefix(&name, "p");
  if (name.empty()) return false;
  for (char c : name) {
    if (!absl::ascii_isdigit(static_cast<unsigned char>(c))) return false;
  }
  return true;
}

}  // namespace

absl::StatusOr<CpuTimes> ParseProcStat(absl::string_view text) {
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    std::vector<absl::string_view> f = Fields(line);
    if (f.empty() || f[0] != "cpu") continue;
    // user nice system idle iowait irq softirq steal; guest time is
    // already inside user and nice.
    if (f.size() < 9) {
      return absl::InvalidArgumentError(absl::StrCat(
          "/proc/stat: the cpu line has ", f.size() - 1,
          " numbers, expected at least 8"));
    }
    uint64_t v[8];
    for (int i = 0; i < 8; ++i) {
      if (!ParseCounter(f[i + 1], &v[i])) {
        return absl::InvalidArgumentError(
            absl::StrCat("/proc/stat: cpu field ", i + 1, " is not a number: \"",
                         f[i + 1], "\""));
      }
    }
    CpuTimes t;
    for (uint64_t x : v) t.total += x;
    t.busy = t.total - v[3] - v[4];
    return t;
  }
  return absl::InvalidArgumentError("/proc/stat: no \"cpu\" line");
}

absl::StatusOr<int64_t> ParseMemAvailableBytes(absl::string_view text) {
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    if (!absl::ConsumePrefix(&line, "MemAvailable:")) continue;
    std::vector<absl::string_view> f = Fields(line);
    int64_t bytes = 0;
    if (f.size() != 2 || f[1] != "kB" || !KibibytesToBytes(f[0], &bytes)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "/proc/meminfo: MemAvailable is not \"<number> kB\": \"", line, "\""));
    }
    return bytes;
  }
  return absl::InvalidArgumentError(
      "/proc/meminfo: no MemAvailable line (Linux 3.14 or later has it)");
}

bool KibibytesToBytes(absl::string_view kib_text, int64_t* bytes) {
  int64_t kib = 0;
  if (!absl::SimpleAtoi(kib_text, &kib) || kib < 0 ||
      kib > std::numeric_limits<int64_t>::max() / 1024) {
    return false;
  }
  *bytes = kib * 1024;
  return true;
}

absl::StatusOr<absl::flat_hash_map<std::string, DiskCounters>> ParseDiskStats(
    absl::string_view text) {
  absl::flat_hash_map<std::string, DiskCounters> all;
  int line_number = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    ++line_number;
    std::vector<absl::string_view> f = Fields(line);
    if (f.empty()) continue;
    // major minor name, then reads merged sectors ms, writes merged
    // sectors ms, ...
    DiskCounters c;
    if (f.size() < 10 || !ParseCounter(f[3], &c.reads) ||
        !ParseCounter(f[5], &c.read_sectors) ||
        !ParseCounter(f[7], &c.writes) ||
        !ParseCounter(f[9], &c.write_sectors)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "/proc/diskstats line ", line_number, ": expected \"major minor name "
          "reads merged sectors ms writes merged sectors ...\", got \"", line,
          "\""));
    }
    if (IsVirtualDisk(f[2])) continue;
    all.emplace(std::string(f[2]), c);
  }
  absl::flat_hash_map<std::string, DiskCounters> disks;
  for (const auto& [name, counters] : all) {
    bool partition = false;
    for (const auto& other : all) {
      if (IsPartitionOf(name, other.first)) {
        partition = true;
        break;
      }
    }
    if (!partition) disks.emplace(name, counters);
  }
  return disks;
}

absl::StatusOr<absl::flat_hash_map<std::string, NetCounters>> ParseNetDev(
    absl::string_view text) {
  absl::flat_hash_map<std::string, NetCounters> interfaces;
  int line_number = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    ++line_number;
    // Two header lines, then "  eth0: rx_bytes packets ... tx_bytes ...".
    const size_t colon = line.find(':');
    if (line_number <= 2 || colon == absl::string_view::npos) continue;
    const absl::string_view name =
        absl::StripAsciiWhitespace(line.substr(0, colon));
    std::vector<absl::string_view> f = Fields(line.substr(colon + 1));
    NetCounters c;
    if (f.size() < 16 || !ParseCounter(f[0], &c.received_bytes) ||
        !ParseCounter(f[8], &c.sent_bytes)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "/proc/net/dev line ", line_number,
          ": expected an interface and 16 counters, got \"", line, "\""));
    }
    if (std::find(std::begin(signals::kNetworkDevicesLeftOut),
                  std::end(signals::kNetworkDevicesLeftOut),
                  name) != std::end(signals::kNetworkDevicesLeftOut)) {
      continue;
    }
    interfaces.emplace(std::string(name), c);
  }
  return interfaces;
}

std::optional<uint64_t> CounterDelta(uint64_t previous, uint64_t current) {
  if (current >= previous) return current - previous;
  constexpr uint64_t k32 = std::numeric_limits<uint32_t>::max();
  if (previous <= k32) return (k32 - previous) + current + 1;
  return std::nullopt;
}

}  // namespace metrics::client
