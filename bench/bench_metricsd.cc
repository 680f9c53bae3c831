#include "bench/bench_metricsd.h"

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "common/status_macros.h"

namespace metrics::bench {

absl::StatusOr<BenchMetricsd> StartBenchMetricsd(const std::string& metricsd,
                                                 const std::string& database_url) {
  BenchMetricsd out;
  ASSIGN_OR_RETURN(out.process,
                   test_util::Subprocess::Start({metricsd, "--database-url=" + database_url,
                                                 "--grpc-address=127.0.0.1:0",
                                                 "--http-address=127.0.0.1:0", "--auth=off"}));
  ASSIGN_OR_RETURN(std::string grpc_line,
                   out.process->WaitForLine("gRPC listening on", absl::Seconds(30)));
  ASSIGN_OR_RETURN(std::string http_line,
                   out.process->WaitForLine("HTTP listening on", absl::Seconds(30)));
  out.grpc_target = absl::StrCat("127.0.0.1:", grpc_line.substr(grpc_line.rfind(':') + 1));
  // "... HTTP listening on http://127.0.0.1:PORT (health: ...)"
  const size_t at = http_line.find("127.0.0.1:");
  const std::string rest = at == std::string::npos ? "" : http_line.substr(at + 10);
  if (!absl::SimpleAtoi(rest.substr(0, rest.find(' ')), &out.http_port)) {
    return absl::InternalError("cannot read metricsd's HTTP port: " + http_line);
  }
  return out;
}

}  // namespace metrics::bench
