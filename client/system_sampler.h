// Samples one host's system metrics the way the design names them: CPU
// utilisation, available memory, disk IOPS and throughput, network
// throughput (from /proc) and, with NVML, per GPU utilisation and free
// memory. Rates come from the change of counters between two samples.
//
// Usage:
//   ASSIGN_OR_RETURN(auto sampler, SystemSampler::Create(options));
//   every interval: Sample s = sampler->Take(steady_clock::now());
//                   reporter->Record(absl::Now(), s.measurements);
//
// Thread-compatible.
#ifndef METRICS_CLIENT_SYSTEM_SAMPLER_H_
#define METRICS_CLIENT_SYSTEM_SAMPLER_H_

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "client/job_sampler.h"
#include "client/nvml.h"
#include "client/proc_stats.h"
#include "client/reporter.h"

namespace metrics::client {

struct SamplerOptions {
  // Where proc(5) is mounted; tests point it at recorded files.
  std::string proc_root = "/proc";
  // GPUs to sample; null for none.
  std::unique_ptr<Nvml> nvml;
  // The job's own share (client/job_sampler.h), beside the host's series;
  // unset for none.
  std::optional<JobOptions> job;
};

// One sample: the measurements that could be taken, and what failed.
struct Sample {
  // Views into the sampler; valid until the next Take.
  std::vector<Measurement> measurements;
  // One per source that failed this time ("/proc/diskstats: ..."); the
  // other sources' measurements are still there.
  std::vector<absl::Status> errors;
};

class SystemSampler {
 public:
  // Reads every source once, as the base for the first rates. Fails if no
  // /proc source can be read at all (not Linux, or wrong proc_root), or as
  // JobSampler::Create for a job that does not exist.
  static absl::StatusOr<std::unique_ptr<SystemSampler>> Create(
      SamplerOptions options, std::chrono::steady_clock::time_point now);

  // Memory and GPU readings, and the rates since the previous Take (or
  // Create). A device or interface that appeared since then starts
  // counting at the next Take; one that vanished no longer counts.
  Sample Take(std::chrono::steady_clock::time_point now);

  int gpu_count() const;
  // The GPUs sampled; null without NVML.
  Nvml* nvml() const { return options_.nvml.get(); }

 private:
  struct Counters {
    std::optional<CpuTimes> cpu;
    std::optional<absl::flat_hash_map<std::string, DiskCounters>> disks;
    std::optional<absl::flat_hash_map<std::string, NetCounters>> net;
  };

  explicit SystemSampler(SamplerOptions options)
      : options_(std::move(options)) {}
  Counters ReadCounters(std::vector<absl::Status>& errors) const;
  void AddRates(const Counters& now, double seconds, Sample& sample);
  absl::StatusOr<std::string> ReadProcFile(const char* name) const;

  SamplerOptions options_;
  std::unique_ptr<JobSampler> job_;
  Counters previous_;
  std::chrono::steady_clock::time_point previous_time_;
};

}  // namespace metrics::client

#endif  // METRICS_CLIENT_SYSTEM_SAMPLER_H_
