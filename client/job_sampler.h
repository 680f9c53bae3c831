// The job's own share of the host, beside the host-wide series: its
// processes (the tree under --pid, or every process of --cgroup) and what
// they use (CPU, resident memory, GPU memory per GPU from NVML), and its
// cgroup read as the kernel limits it, so a job allowed 8 of 128 CPUs and
// using all 8 reads 100 %, not 6 %.
//
// Series (agent-wide unless per GPU):
//   process_cpu_util     percent, 100 = one CPU (like top)
//   process_memory_rss   bytes, the processes' resident memory
//   process_gpu_memory   bytes per GPU (nvmlDeviceGetComputeRunningProcesses)
//   cgroup_cpu_util      percent of the CPUs the cgroup may use
//   cgroup_memory_used   bytes (memory.current, memory.usage_in_bytes)
//   cgroup_memory_limit  bytes, when the cgroup has one
//
// The process tree under --pid is walked (every /proc/<pid>/stat) at most
// every 10 s; between walks only its known processes are read, so a new
// child counts from the next walk on.
//
// Thread-compatible: one thread samples.
#ifndef METRICS_CLIENT_JOB_SAMPLER_H_
#define METRICS_CLIENT_JOB_SAMPLER_H_

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "client/cgroup.h"
#include "client/nvml.h"
#include "client/reporter.h"

namespace metrics::client {

struct JobOptions {
  // The job's main process: it and its descendants are the job's
  // processes. 0: none.
  int pid = 0;
  // The job's cgroup ("/slurm/uid_1000/job_42", or "self"); its processes
  // are the job's when pid is 0. Empty: none.
  std::string cgroup;
  // Where cgroupfs is mounted; where proc(5) is (tests use fixture trees).
  std::string cgroup_root = "/sys/fs/cgroup";
  std::string proc_root = "/proc";
  // sysconf(_SC_CLK_TCK) and the page size; tests set them.
  long ticks_per_second = 0;
  long page_bytes = 0;
};

// One process's counters from /proc/<pid>/stat.
struct ProcessStat {
  int pid = 0;
  int parent = 0;
  uint64_t cpu_ticks = 0;  // utime + stime
  uint64_t rss_pages = 0;
};

// /proc/<pid>/stat's text (its command name may hold spaces and ')').
absl::StatusOr<ProcessStat> ParseProcessStat(absl::string_view text);

class JobSampler {
 public:
  // INVALID_ARGUMENT without a pid or cgroup; NOT_FOUND for a cgroup or
  // process that does not exist.
  static absl::StatusOr<std::unique_ptr<JobSampler>> Create(
      JobOptions options, std::chrono::steady_clock::time_point now);

  // Appends the job's measurements to `out` (names and units are static;
  // GPU UUIDs point into `nvml`, which may be null) and what failed to
  // `errors`. Rates are since the previous Take (or Create).
  void Take(std::chrono::steady_clock::time_point now, Nvml* nvml,
            std::vector<Measurement>& out, std::vector<absl::Status>& errors);

 private:
  explicit JobSampler(JobOptions options) : options_(std::move(options)) {}
  std::vector<int> Processes() const;
  absl::flat_hash_map<int, ProcessStat> ReadProcesses(
      const std::vector<int>& pids) const;

  JobOptions options_;
  std::optional<CgroupPaths> cgroup_;
  int host_cpus_ = 1;
  // The job's processes as last found, and when the tree was last walked.
  std::vector<int> job_pids_;
  std::chrono::steady_clock::time_point walked_at_;
  absl::flat_hash_map<int, ProcessStat> previous_;
  std::optional<uint64_t> previous_cgroup_us_;
  std::chrono::steady_clock::time_point previous_time_;
};

}  // namespace metrics::client

#endif  // METRICS_CLIENT_JOB_SAMPLER_H_
