#include "tests/testing/metricsd_process.h"

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace metrics::test_util {

using ::metrics::common::Subprocess;

absl::StatusOr<MetricsdProcess> StartMetricsd(std::vector<std::string> argv) {
  absl::StatusOr<std::unique_ptr<Subprocess>> process =
      Subprocess::Start(std::move(argv));
  if (!process.ok()) return process.status();
  absl::StatusOr<std::string> line =
      (*process)->WaitForLine("gRPC listening on", absl::Seconds(30));
  if (!line.ok()) return line.status();
  // Printed with the gRPC line: "... http://host:port (health: ...)".
  absl::StatusOr<std::string> http =
      (*process)->WaitForLine("HTTP listening on", absl::Seconds(5));
  if (!http.ok()) return http.status();
  std::string address = http->substr(http->find("://") + 3);
  address.resize(address.find(' '));
  int http_port = 0;
  if (!absl::SimpleAtoi(address.substr(address.rfind(':') + 1), &http_port)) {
    return absl::InternalError(absl::StrCat("no HTTP port in \"", *http, "\""));
  }
  return MetricsdProcess{*std::move(process),
                         absl::StrCat("127.0.0.1:", line->substr(line->rfind(':') + 1)),
                         http_port};
}

}  // namespace metrics::test_util
