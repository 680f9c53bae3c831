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

// The postmaster of the cluster in `data_directory` (the first line of its
// postmaster.pid); 0 when that cannot be read.
pid_t PostmasterPid(const std::string& data_directory);

}  // namespace metrics::bench

#endif  // METRICS_BENCH_CPU_TIME_H_
