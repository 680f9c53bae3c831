// CPU time used by processes of this machine, read from /proc: a benchmark
// figure steadier than wall time on a shared machine, where another
// tenant's load stretches wall time much more than the CPU time our own
// processes use for the same work.
//
// Thread-safety: stateless; safe from any thread.
#ifndef METRICS_BENCH_CPU_TIME_H_
#define METRICS_BENCH_CPU_TIME_H_

#include <sys/types.h>

#include <string>
#include <vector>

namespace metrics::bench {

// Seconds of CPU `pid` has used, with those of the children it has reaped;
// 0 when it is gone.
double ProcessCpuSeconds(pid_t pid);

// Of `root` and its live children. For a PostgreSQL cluster's postmaster,
// which reaps each backend that ends (adding its time to its own), the
// whole cluster's use so far.
double ProcessTreeCpuSeconds(pid_t root);

// This process's own use, all threads.
double SelfCpuSeconds();

// That of the children this process has reaped (a finished Subprocess).
double ChildrenCpuSeconds();

// The postmaster of the cluster in `data_directory` (the first line of its
// postmaster.pid); 0 when that cannot be read.
pid_t PostmasterPid(const std::string& data_directory);

// CPU seconds used by the PostgreSQL cluster, this process (the COPY's or
// the streams' client) and metricsd: the machine's cost of the work.
struct CpuUse {
  double postgres = 0, client = 0, metricsd = 0;

  // So far; `metricsd` the pids of the metricsd processes, if any.
  static CpuUse Now(pid_t postmaster, const std::vector<pid_t>& metricsd) {
    CpuUse use{ProcessTreeCpuSeconds(postmaster), SelfCpuSeconds(), 0};
    for (pid_t pid : metricsd) use.metricsd += ProcessCpuSeconds(pid);
    return use;
  }
  CpuUse operator-(const CpuUse& before) const {
    return {postgres - before.postgres, client - before.client,
            metricsd - before.metricsd};
  }
  double Total() const { return postgres + client + metricsd; }
};

}  // namespace metrics::bench

#endif  // METRICS_BENCH_CPU_TIME_H_
