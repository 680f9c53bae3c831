#include "tests/testing/metricsd_process.h"

#include "absl/strings/str_cat.h"

namespace metrics::test_util {

absl::StatusOr<MetricsdProcess> StartMetricsd(std::vector<std::string> argv) {
  absl::StatusOr<std::unique_ptr<Subprocess>> process =
      Subprocess::Start(std::move(argv));
  if (!process.ok()) return process.status();
  absl::StatusOr<std::string> line =
      (*process)->WaitForLine("gRPC listening on", absl::Seconds(30));
  if (!line.ok()) return line.status();
  return MetricsdProcess{
      *std::move(process),
      absl::StrCat("127.0.0.1:", line->substr(line->rfind(':') + 1))};
}

}  // namespace metrics::test_util
