#include "client/cgroup.h"

#include <filesystem>
#include <limits>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "client/small_file.h"

namespace metrics::client {

namespace {

// The kernel's "no limit" for v1 byte limits is PAGE_COUNTER_MAX pages, a
// number near 2^63; anything from 2^60 up is taken as none.
constexpr uint64_t kNoByteLimitFrom = uint64_t{1} << 60;


absl::Status Bad(absl::string_view what, absl::string_view text) {
  return absl::InvalidArgumentError(absl::StrCat(
      what, ": \"", absl::StripAsciiWhitespace(text.substr(0, 64)),
      "\" is not understood"));
}

}  // namespace

absl::StatusOr<std::optional<double>> ParseCpuMax(absl::string_view text) {
  std::vector<absl::string_view> f =
      absl::StrSplit(absl::StripAsciiWhitespace(text), ' ', absl::SkipEmpty());
  uint64_t quota = 0, period = 0;
  if (f.size() != 2 || !absl::SimpleAtoi(f[1], &period) || period == 0) {
    return Bad("cpu.max", text);
  }
  if (f[0] == "max") return std::optional<double>();
  if (!absl::SimpleAtoi(f[0], &quota)) return Bad("cpu.max", text);
  return std::optional<double>(static_cast<double>(quota) / period);
}

absl::StatusOr<uint64_t> ParseCpuStatUsageMicros(absl::string_view text) {
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    if (!absl::ConsumePrefix(&line, "usage_usec ")) continue;
    uint64_t usec = 0;
    if (!absl::SimpleAtoi(line, &usec)) return Bad("cpu.stat usage_usec", line);
    return usec;
  }
  return absl::InvalidArgumentError("cpu.stat: no usage_usec line");
}

absl::StatusOr<int> CountCpuList(absl::string_view text) {
  // Linux numbers at most 8192 CPUs; a list naming more is not believed.
  constexpr int64_t kMaxCpus = 8192;
  int64_t count = 0;
  for (absl::string_view range :
       absl::StrSplit(absl::StripAsciiWhitespace(text), ',', absl::SkipEmpty())) {
    std::pair<absl::string_view, absl::string_view> ends =
        absl::StrSplit(range, absl::MaxSplits('-', 1));
    int from = 0, to = 0;
    if (!absl::SimpleAtoi(ends.first, &from)) return Bad("cpu list", text);
    to = from;
    if (!ends.second.empty() && !absl::SimpleAtoi(ends.second, &to)) {
      return Bad("cpu list", text);
    }
    if (to < from || from < 0 || to >= kMaxCpus) return Bad("cpu list", text);
    count += int64_t{to} - from + 1;
  }
  if (count > kMaxCpus) return Bad("cpu list", text);
  return static_cast<int>(count);
}

absl::StatusOr<std::optional<uint64_t>> ParseMemoryLimit(absl::string_view text) {
  text = absl::StripAsciiWhitespace(text);
  if (text == "max") return std::optional<uint64_t>();
  uint64_t bytes = 0;
  if (!absl::SimpleAtoi(text, &bytes)) return Bad("memory limit", text);
  if (bytes >= kNoByteLimitFrom) return std::optional<uint64_t>();
  return std::optional<uint64_t>(bytes);
}

int CountCpusInProcStat(absl::string_view text) {
  int count = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    if (absl::StartsWith(line, "cpu") && line.size() > 3 &&
        absl::ascii_isdigit(static_cast<unsigned char>(line[3]))) {
      ++count;
    }
  }
  return count;
}

absl::StatusOr<CgroupPaths> FindCgroup(const std::string& root,
                                       const std::string& path,
                                       const std::string& proc_root) {
  namespace fs = std::filesystem;
  std::error_code error;
  CgroupPaths paths;
  paths.version = fs::exists(root + "/cgroup.controllers", error) ? 2 : 1;
  std::string v2_path = path, cpuacct_path = path, cpu_path = path,
              memory_path = path;
  if (path == "self") {
    absl::StatusOr<std::string> own = ReadSmallFile(proc_root + "/self/cgroup");
    if (!own.ok()) return own.status();
    // v2: "0::/path"; v1: "4:cpu,cpuacct:/path", "7:memory:/path".
    for (absl::string_view line : absl::StrSplit(*own, '\n', absl::SkipEmpty())) {
      std::vector<absl::string_view> f = absl::StrSplit(line, absl::MaxSplits(':', 2));
      if (f.size() != 3) continue;
      if (f[0] == "0" && f[1].empty()) v2_path = std::string(f[2]);
      for (absl::string_view c : absl::StrSplit(f[1], ',')) {
        if (c == "cpuacct") cpuacct_path = std::string(f[2]);
        if (c == "cpu") cpu_path = std::string(f[2]);
        if (c == "memory") memory_path = std::string(f[2]);
      }
    }
  }
  if (paths.version == 2) {
    paths.cpu_dir = paths.quota_dir = paths.memory_dir = root + v2_path;
  } else if (fs::is_directory(root + "/cpu,cpuacct", error)) {
    paths.cpu_dir = root + "/cpu,cpuacct" + cpuacct_path;
    paths.quota_dir = root + "/cpu,cpuacct" + cpu_path;
    paths.memory_dir = root + "/memory" + memory_path;
  } else {
    paths.cpu_dir = root + "/cpuacct" + cpuacct_path;
    paths.quota_dir = root + "/cpu" + cpu_path;
    paths.memory_dir = root + "/memory" + memory_path;
  }
  for (const std::string& dir : {paths.cpu_dir, paths.quota_dir, paths.memory_dir}) {
    if (!fs::is_directory(dir, error)) {
      return absl::NotFoundError(absl::StrCat(
          "cgroup ", path, ": ", dir, " is not a directory (cgroup v",
          paths.version, " under ", root, ")"));
    }
  }
  return paths;
}

CgroupReading ReadCgroup(const CgroupPaths& paths,
                         std::vector<absl::Status>& errors) {
  CgroupReading r;
  // Each file: read, parse, keep; or say which failed.
  auto read = [&](const std::string& path, auto parse, auto& out) {
    absl::StatusOr<std::string> text = ReadSmallFile(path);
    auto parsed = text.ok() ? parse(*text) : decltype(parse(*text))(text.status());
    if (!parsed.ok()) {
      errors.push_back(absl::Status(parsed.status().code(),
                                    absl::StrCat(path, ": ", parsed.status().message())));
      return;
    }
    out = *std::move(parsed);
  };
  const auto number = [](const std::string& t) -> absl::StatusOr<uint64_t> {
    uint64_t v = 0;
    if (!absl::SimpleAtoi(absl::StripAsciiWhitespace(t), &v)) return Bad("value", t);
    return v;
  };
  if (paths.version == 2) {
    read(paths.cpu_dir + "/cpu.stat",
         [](const std::string& t) { return ParseCpuStatUsageMicros(t); },
         r.cpu_usage_us);
    // A cgroup without the cpu controller enabled has no cpu.max: no quota.
    if (std::filesystem::exists(paths.quota_dir + "/cpu.max")) {
      read(paths.quota_dir + "/cpu.max",
           [](const std::string& t) { return ParseCpuMax(t); }, r.cpu_limit);
    }
    if (std::filesystem::exists(paths.quota_dir + "/cpuset.cpus.effective")) {
      read(paths.quota_dir + "/cpuset.cpus.effective",
           [](const std::string& t) { return CountCpuList(t); }, r.cpuset_cpus);
    }
    read(paths.memory_dir + "/memory.current", number, r.memory_used_bytes);
    read(paths.memory_dir + "/memory.max",
         [](const std::string& t) { return ParseMemoryLimit(t); },
         r.memory_limit_bytes);
  } else {
    std::optional<uint64_t> usage_ns;
    read(paths.cpu_dir + "/cpuacct.usage", number, usage_ns);
    if (usage_ns) r.cpu_usage_us = *usage_ns / 1000;
    std::optional<uint64_t> period;
    std::optional<std::string> quota;
    read(paths.quota_dir + "/cpu.cfs_period_us", number, period);
    read(paths.quota_dir + "/cpu.cfs_quota_us",
         [](const std::string& t) -> absl::StatusOr<std::string> {
           return std::string(absl::StripAsciiWhitespace(t));
         },
         quota);
    uint64_t q = 0;
    if (period && *period > 0 && quota && absl::SimpleAtoi(*quota, &q)) {
      r.cpu_limit = static_cast<double>(q) / *period;  // "-1": no quota
    }
    read(paths.memory_dir + "/memory.usage_in_bytes", number, r.memory_used_bytes);
    read(paths.memory_dir + "/memory.limit_in_bytes",
         [](const std::string& t) { return ParseMemoryLimit(t); },
         r.memory_limit_bytes);
  }
  return r;
}

std::vector<int> CgroupProcesses(const CgroupPaths& paths) {
  namespace fs = std::filesystem;
  std::vector<int> pids;
  std::error_code error;
  std::vector<std::string> dirs = {paths.cpu_dir};
  for (fs::recursive_directory_iterator it(paths.cpu_dir, error), end;
       !error && it != end; it.increment(error)) {
    if (it->is_directory(error)) dirs.push_back(it->path().string());
  }
  for (const std::string& dir : dirs) {
    absl::StatusOr<std::string> text = ReadSmallFile(dir + "/cgroup.procs");
    if (!text.ok()) continue;
    for (absl::string_view line : absl::StrSplit(*text, '\n', absl::SkipEmpty())) {
      int pid = 0;
      if (absl::SimpleAtoi(line, &pid) && pid > 0) pids.push_back(pid);
    }
  }
  return pids;
}

}  // namespace metrics::client
