#include "client/job_sampler.h"

#include <unistd.h>

#include <filesystem>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "client/signal_value.h"
#include "client/small_file.h"

namespace metrics::client {

namespace {

// How often the whole process table is walked for the job's new
// descendants; between walks only the known ones are read.
constexpr auto kTreeWalkEvery = std::chrono::seconds(10);

}  // namespace

absl::StatusOr<ProcessStat> ParseProcessStat(absl::string_view text) {
  // "pid (comm) state ppid ...": comm may hold anything, so the fields
  // after it start after its last ')'.
  const size_t close = text.rfind(')');
  int pid = 0;
  if (close == absl::string_view::npos ||
      !absl::SimpleAtoi(text.substr(0, text.find(' ')), &pid)) {
    return absl::InvalidArgumentError("stat: no \"pid (comm)\" at its start");
  }
  std::vector<absl::string_view> f =
      absl::StrSplit(text.substr(close + 1), ' ', absl::SkipEmpty());
  // f[0] is field 3 (state): ppid is field 4, utime 14, stime 15, rss 24.
  ProcessStat stat;
  stat.pid = pid;
  uint64_t utime = 0, stime = 0;
  if (f.size() < 22 || !absl::SimpleAtoi(f[1], &stat.parent) ||
      !absl::SimpleAtoi(f[11], &utime) || !absl::SimpleAtoi(f[12], &stime) ||
      !absl::SimpleAtoi(f[21], &stat.rss_pages)) {
    return absl::InvalidArgumentError(
        absl::StrCat("stat of process ", pid, ": too few or bad fields"));
  }
  stat.cpu_ticks = utime + stime;
  return stat;
}

absl::StatusOr<std::unique_ptr<JobSampler>> JobSampler::Create(
    JobOptions options, std::chrono::steady_clock::time_point now) {
  if (options.pid <= 0 && options.cgroup.empty()) {
    return absl::InvalidArgumentError("the job needs a pid or a cgroup");
  }
  if (options.ticks_per_second <= 0) options.ticks_per_second = sysconf(_SC_CLK_TCK);
  if (options.page_bytes <= 0) options.page_bytes = sysconf(_SC_PAGESIZE);
  std::unique_ptr<JobSampler> sampler(new JobSampler(std::move(options)));
  const JobOptions& o = sampler->options_;
  if (o.pid > 0 && !ReadSmallFile(absl::StrCat(o.proc_root, "/", o.pid, "/stat")).ok()) {
    return absl::NotFoundError(absl::StrCat("--pid ", o.pid, ": no such process in ",
                                            o.proc_root));
  }
  if (!o.cgroup.empty()) {
    absl::StatusOr<CgroupPaths> paths = FindCgroup(o.cgroup_root, o.cgroup, o.proc_root);
    if (!paths.ok()) return paths.status();
    sampler->cgroup_ = *std::move(paths);
  }
  if (absl::StatusOr<std::string> stat = ReadSmallFile(o.proc_root + "/stat"); stat.ok()) {
    sampler->host_cpus_ = std::max(1, CountCpusInProcStat(*stat));
  }
  std::vector<absl::Status> ignored;
  sampler->job_pids_ = sampler->Processes();
  sampler->walked_at_ = now;
  sampler->previous_ = sampler->ReadProcesses(sampler->job_pids_);
  if (sampler->cgroup_) {
    sampler->previous_cgroup_us_ = ReadCgroup(*sampler->cgroup_, ignored).cpu_usage_us;
  }
  sampler->previous_time_ = now;
  return sampler;
}

// The process and its descendants (by each process's parent), or the
// cgroup's processes.
std::vector<int> JobSampler::Processes() const {
  if (options_.pid <= 0) return CgroupProcesses(*cgroup_);
  absl::flat_hash_map<int, std::vector<int>> children;
  std::error_code error;
  for (std::filesystem::directory_iterator it(options_.proc_root, error), end;
       !error && it != end; it.increment(error)) {
    int pid = 0;
    if (!absl::SimpleAtoi(it->path().filename().string(), &pid)) continue;
    absl::StatusOr<std::string> text = ReadSmallFile(it->path().string() + "/stat");
    if (!text.ok()) continue;  // it exited meanwhile
    if (absl::StatusOr<ProcessStat> stat = ParseProcessStat(*text); stat.ok()) {
      children[stat->parent].push_back(pid);
    }
  }
  std::vector<int> tree = {options_.pid};
  for (size_t i = 0; i < tree.size(); ++i) {
    auto it = children.find(tree[i]);
    if (it != children.end()) tree.insert(tree.end(), it->second.begin(), it->second.end());
  }
  return tree;
}

absl::flat_hash_map<int, ProcessStat> JobSampler::ReadProcesses(
    const std::vector<int>& pids) const {
  absl::flat_hash_map<int, ProcessStat> stats;
  for (int pid : pids) {
    absl::StatusOr<std::string> text =
        ReadSmallFile(absl::StrCat(options_.proc_root, "/", pid, "/stat"));
    if (!text.ok()) continue;
    if (absl::StatusOr<ProcessStat> stat = ParseProcessStat(*text); stat.ok()) {
      stats[pid] = *stat;
    }
  }
  return stats;
}

void JobSampler::Take(std::chrono::steady_clock::time_point now, Nvml* nvml,
                      std::vector<Measurement>& out,
                      std::vector<absl::Status>& errors) {
  const double seconds =
      std::chrono::duration<double>(now - previous_time_).count();
  previous_time_ = now;
  // The tree is walked again now and then; a process that exited is
  // simply not read.
  if (options_.pid <= 0 || now - walked_at_ >= kTreeWalkEvery) {
    job_pids_ = Processes();
    walked_at_ = now;
  }
  absl::flat_hash_map<int, ProcessStat> stats = ReadProcesses(job_pids_);
  if (stats.empty() && options_.pid > 0) {
    errors.push_back(absl::NotFoundError(
        absl::StrCat("--pid ", options_.pid, ": the process is gone")));
  }
  uint64_t ticks = 0, rss_pages = 0;
  for (const auto& [pid, stat] : stats) {
    rss_pages += stat.rss_pages;
    // A process counts from its second sample on (its first is its base).
    auto before = previous_.find(pid);
    if (before != previous_.end() && stat.cpu_ticks >= before->second.cpu_ticks) {
      ticks += stat.cpu_ticks - before->second.cpu_ticks;
    }
  }
  if (seconds > 0) {
    out.push_back(SignalValue(signals::kProcessCpuUtil,
                              100.0 * ticks / options_.ticks_per_second / seconds));
  }
  out.push_back(SignalValue(signals::kProcessMemoryRss,
                            static_cast<double>(rss_pages) * options_.page_bytes));
  if (nvml != nullptr) {
    absl::flat_hash_set<int> pids;
    for (const auto& [pid, stat] : stats) pids.insert(pid);
    const std::vector<std::optional<uint64_t>> used = nvml->ProcessMemory(pids);
    for (size_t i = 0; i < used.size(); ++i) {
      if (used[i]) {
        out.push_back(SignalValue(signals::kProcessGpuMemory, static_cast<double>(*used[i]),
                                  nvml->uuids()[i]));
      }
    }
  }
  previous_ = std::move(stats);

  if (!cgroup_) return;
  const CgroupReading cg = ReadCgroup(*cgroup_, errors);
  if (cg.cpu_usage_us && previous_cgroup_us_ && seconds > 0 &&
      *cg.cpu_usage_us >= *previous_cgroup_us_) {
    // What it may use: its quota, else its cpuset, else every CPU.
    const double cpus = cg.cpu_limit ? *cg.cpu_limit
                        : cg.cpuset_cpus ? *cg.cpuset_cpus
                                         : host_cpus_;
    if (cpus > 0) {
      out.push_back(SignalValue(
          signals::kCgroupCpuUtil,
          100.0 * (*cg.cpu_usage_us - *previous_cgroup_us_) / 1e6 / seconds / cpus));
    }
  }
  previous_cgroup_us_ = cg.cpu_usage_us;
  if (cg.memory_used_bytes) {
    out.push_back(
        SignalValue(signals::kCgroupMemoryUsed, static_cast<double>(*cg.memory_used_bytes)));
  }
  if (cg.memory_limit_bytes) {
    out.push_back(
        SignalValue(signals::kCgroupMemoryLimit, static_cast<double>(*cg.memory_limit_bytes)));
  }
}

}  // namespace metrics::client
