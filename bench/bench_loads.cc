#include "bench/bench_loads.h"

#include <algorithm>
#include <cstdio>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "bench/cpu_time.h"
#include "common/status_macros.h"
#include "storage/pg/testing/pg_checks.h"
#include "tests/testing/test_database.h"

namespace metrics::bench {

absl::StatusOr<pid_t> BenchPostmaster() {
  ASSIGN_OR_RETURN(std::unique_ptr<test_util::TestDatabase> db,
                   test_util::TestDatabase::Create());
  ASSIGN_OR_RETURN(std::string data_directory,
                   storage::pg::test_util::QueryScalar(
                       db->url(), "SELECT current_setting('data_directory')"));
  const pid_t postmaster = PostmasterPid(data_directory);
  if (postmaster == 0) {
    return absl::NotFoundError(
        absl::StrCat("cannot find PostgreSQL's postmaster of ", data_directory));
  }
  return postmaster;
}

absl::StatusOr<BenchMetricsd> StartBenchMetricsd(const std::string& metricsd,
                                                 const std::string& database_url,
                                                 const std::vector<std::string>& flags) {
  BenchMetricsd out;
  std::vector<std::string> argv = {metricsd, "--database-url=" + database_url,
                                   "--grpc-address=127.0.0.1:0", "--http-address=127.0.0.1:0"};
  argv.insert(argv.end(), flags.begin(), flags.end());
  ASSIGN_OR_RETURN(out.process, common::Subprocess::Start(argv));
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

absl::StatusOr<std::map<std::string, WayLoad>> RunRounds(
    const std::vector<std::string>& ways, int rounds, int64_t values, int width,
    const std::function<absl::StatusOr<WayLoad>(const std::string&)>& load,
    bool& all_stored) {
  std::printf("%-*s %6s %14s %8s %26s %10s\n", width, "way", "round", "values/s", "s",
              "CPU ns/value: all md pg cl", "stored");
  std::map<std::string, WayLoad> best;
  all_stored = true;
  for (int round = 0; round < rounds; ++round) {
    std::vector<std::string> order = ways;
    if (round % 2 == 1) std::reverse(order.begin(), order.end());
    for (const std::string& way : order) {
      absl::StatusOr<WayLoad> l = load(way);
      if (!l.ok()) return absl::Status(l.status().code(), absl::StrCat(way, ": ", l.status().message()));
      const double ns = 1e9 / values;
      std::printf("%-*s %6d %14.0f %8.2f %10.0f %4.0f %4.0f %4.0f %10lld%s\n", width,
                  way.c_str(), round + 1, values / l->seconds, l->seconds, ns * l->cpu.Total(),
                  ns * l->cpu.metricsd, ns * l->cpu.postgres, ns * l->cpu.client,
                  static_cast<long long>(l->stored),
                  l->failure.empty() ? "" : ("  FAILED: " + l->failure).c_str());
      if (!l->failure.empty() || l->stored != values) all_stored = false;
      if (best.count(way) == 0 || l->seconds < best[way].seconds) best[way] = *l;
    }
  }
  return best;
}

}  // namespace metrics::bench
