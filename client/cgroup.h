// A job's control group, read the way the kernel limits it: the CPU time it
// used and how many CPUs it may use (cgroup v2 cpu.max or its cpuset; v1
// cpu.cfs_quota_us / cpu.cfs_period_us), its memory use and limit (v2
// memory.current / memory.max; v1 memory.usage_in_bytes /
// memory.limit_in_bytes), and its processes. The parsers are pure functions
// over the files' text, so tests run them on fixture trees of both versions.
//
// Thread-safety: pure functions; CgroupReader is thread-compatible.
#ifndef METRICS_CLIENT_CGROUP_H_
#define METRICS_CLIENT_CGROUP_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace metrics::client {

// cgroup v2 cpu.max ("max 100000", "800000 100000"): the CPUs the quota
// allows, nullopt for none.
absl::StatusOr<std::optional<double>> ParseCpuMax(absl::string_view text);
// v2 cpu.stat's usage_usec.
absl::StatusOr<uint64_t> ParseCpuStatUsageMicros(absl::string_view text);
// A CPU list ("0-7,16-23\n"): how many CPUs it names.
absl::StatusOr<int> CountCpuList(absl::string_view text);
// A byte limit (v2 memory.max "max" or a number; v1 limit_in_bytes, where
// the kernel writes "unlimited" as a number near 2^63): nullopt for none.
absl::StatusOr<std::optional<uint64_t>> ParseMemoryLimit(absl::string_view text);
// "cpuN" lines of /proc/stat: the host's CPUs.
int CountCpusInProcStat(absl::string_view text);

// Where a cgroup's files are.
struct CgroupPaths {
  int version = 2;
  // v2: the cgroup, all three. v1: in the cpuacct hierarchy (CPU time),
  // the cpu one (quota; the same where they are mounted together as
  // cpu,cpuacct) and the memory one.
  std::string cpu_dir;
  std::string quota_dir;
  std::string memory_dir;
};

// The cgroup `path` ("/slurm/uid_1000/job_42", or "self": the one this
// process is in, from `proc_root`/self/cgroup) under `root` (where cgroupfs
// is mounted, /sys/fs/cgroup). v2 when `root` has cgroup.controllers.
// NOT_FOUND naming the directory when the cgroup does not exist.
absl::StatusOr<CgroupPaths> FindCgroup(const std::string& root,
                                       const std::string& path,
                                       const std::string& proc_root);

struct CgroupReading {
  std::optional<uint64_t> cpu_usage_us;  // CPU time used since it was made
  std::optional<double> cpu_limit;       // CPUs it may use; unset: no limit
  std::optional<int> cpuset_cpus;        // v2: CPUs of its cpuset
  std::optional<uint64_t> memory_used_bytes;
  std::optional<uint64_t> memory_limit_bytes;  // unset: no limit
};

// Reads what the cgroup's files say; a file that cannot be read or parsed
// leaves its value unset and adds an error naming it.
CgroupReading ReadCgroup(const CgroupPaths& paths,
                         std::vector<absl::Status>& errors);

// The processes of the cgroup and of the cgroups below it (cgroup.procs).
std::vector<int> CgroupProcesses(const CgroupPaths& paths);

}  // namespace metrics::client

#endif  // METRICS_CLIENT_CGROUP_H_
