// A metricsd process for a benchmark: started on a database with tokens off
// and loopback ports chosen at run time, its gRPC target and HTTP port read
// from its startup lines.
//
// Thread-safety: thread-compatible.
#ifndef METRICS_BENCH_BENCH_METRICSD_H_
#define METRICS_BENCH_BENCH_METRICSD_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "tests/testing/subprocess.h"

namespace metrics::bench {

struct BenchMetricsd {
  std::unique_ptr<test_util::Subprocess> process;
  std::string grpc_target;  // "127.0.0.1:PORT"
  int http_port = 0;
};

// `metricsd` (its path) on `database_url`, serving once this returns.
absl::StatusOr<BenchMetricsd> StartBenchMetricsd(const std::string& metricsd,
                                                 const std::string& database_url);

}  // namespace metrics::bench

#endif  // METRICS_BENCH_BENCH_METRICSD_H_
