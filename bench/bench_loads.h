// What the benchmarks that load the same values several ways into metricsd
// (bench/otlp.sh, bench/trial_metrics.sh) share: PostgreSQL's postmaster
// (whose CPU they count), a metricsd process of each load's own (tokens
// off unless flags say, loopback ports chosen at run time and read from its startup lines),
// and the loads run in rounds of alternating order.
//
// Thread-safety: thread-compatible.
#ifndef METRICS_BENCH_BENCH_LOADS_H_
#define METRICS_BENCH_BENCH_LOADS_H_

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "bench/cpu_time.h"
#include "common/subprocess.h"

namespace metrics::bench {

struct BenchMetricsd {
  std::unique_ptr<common::Subprocess> process;
  std::string grpc_target;  // "127.0.0.1:PORT"
  int http_port = 0;
};

// The postmaster of the PostgreSQL the PG* variables name (pg_virtualenv's),
// whose CPU a benchmark counts (bench/cpu_time.h).
absl::StatusOr<pid_t> BenchPostmaster();

// `metricsd` (its path) on `database_url` with `flags`, serving once this
// returns.
absl::StatusOr<BenchMetricsd> StartBenchMetricsd(
    const std::string& metricsd, const std::string& database_url,
    const std::vector<std::string>& flags = {"--auth=off"});

// One load of one way: from its first send to its last answer, the CPU it
// cost, the values it stored, its first failure.
struct WayLoad {
  double seconds = 0;
  CpuUse cpu;
  int64_t stored = -1;
  std::string failure;
};

// Runs `load` of each of `ways` `rounds` times, the order reversed every
// other round, printing a row each (the way's name `width` wide, the CPU a
// value of each process); each way's fastest load. `all_stored` is false
// when a load failed or stored other than `values`.
absl::StatusOr<std::map<std::string, WayLoad>> RunRounds(
    const std::vector<std::string>& ways, int rounds, int64_t values, int width,
    const std::function<absl::StatusOr<WayLoad>(const std::string&)>& load,
    bool& all_stored);

}  // namespace metrics::bench

#endif  // METRICS_BENCH_BENCH_LOADS_H_
