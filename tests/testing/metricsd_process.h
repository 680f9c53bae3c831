// metricsd as a child process, for benchmarks and end-to-end tests: started
// with the given command line (its ports 0 or fixed), its gRPC address and
// HTTP port read from the lines it prints once it serves.
//
// Thread-safety: a plain function; the returned process is as Subprocess.
#ifndef METRICS_TESTS_TESTING_METRICSD_PROCESS_H_
#define METRICS_TESTS_TESTING_METRICSD_PROCESS_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/subprocess.h"

namespace metrics::test_util {

struct MetricsdProcess {
  std::unique_ptr<common::Subprocess> process;
  std::string grpc_target;  // "127.0.0.1:<port>"
  int http_port = 0;
};

// Starts `argv` (metricsd's path first) and waits up to 30 s for it to
// serve; the error names what it printed.
absl::StatusOr<MetricsdProcess> StartMetricsd(std::vector<std::string> argv);

}  // namespace metrics::test_util

#endif  // METRICS_TESTS_TESTING_METRICSD_PROCESS_H_
