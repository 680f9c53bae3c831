// What a chart query costs by each door: the same query (an hour of four
// series, 300 points) asked of one metricsd with tokens required, as
//   rest       GET /api/v1/trials/1/metrics/system, one keep-alive client
//   grpc       QueryService.QuerySeries, one channel
//   rest-N     the REST query from --clients clients at once
// each for --phase, after a warm-up. For each: queries a second, the server's
// CPU a query (metricsd and PostgreSQL), p50 and p99; and REST's CPU over
// gRPC's. --metricsd measures another build's server in the same sitting.
// Run it with bench/doors.sh; the last line is JSON.
#include <signal.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include <grpcpp/create_channel.h>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "bench/bench_http.h"
#include "bench/bench_loads.h"
#include "bench/cpu_time.h"
#include "common/status_macros.h"
#include "proto/metrics/v1/query.grpc.pb.h"
#include "storage/pg/pg_token_store.h"
#include "tests/testing/test_database.h"

ABSL_FLAG(std::string, metricsd, METRICSD_PATH, "The metricsd to measure.");
ABSL_FLAG(absl::Duration, phase, absl::Seconds(10), "How long each way runs.");
ABSL_FLAG(int, clients, 100, "Clients at once in the rest-N way.");

namespace metrics::bench {
namespace {

constexpr char kChartPath[] = "/api/v1/trials/1/metrics/system?maxPoints=300";

// One way's queries over its phase.
struct Way {
  int64_t queries = 0;
  int64_t failed = 0;
  double seconds = 0;
  CpuUse cpu;
  std::vector<double> latencies_ms;

  double Percentile(int p) {
    if (latencies_ms.empty()) return 0;
    std::sort(latencies_ms.begin(), latencies_ms.end());
    return latencies_ms[std::min(latencies_ms.size() - 1, latencies_ms.size() * p / 100)];
  }
  double ServerCpuUs() const {
    return queries == 0 ? 0 : 1e6 * (cpu.metricsd + cpu.postgres) / queries;
  }
};

// Runs `clients` threads, each calling `ask` (true: the expected answer)
// until the phase ends.
template <typename Ask>
Way Run(int clients, absl::Duration phase, pid_t postmaster, pid_t md, Ask ask) {
  std::atomic<bool> stop{false};
  std::vector<Way> each(clients);
  std::vector<std::thread> threads;
  const CpuUse before = CpuUse::Now(postmaster, {md});
  const absl::Time start = absl::Now();
  for (int c = 0; c < clients; ++c) {
    threads.emplace_back([&, c] {
      auto asker = ask();
      while (!stop.load(std::memory_order_relaxed)) {
        const absl::Time sent = absl::Now();
        const bool ok = asker();
        each[c].latencies_ms.push_back(absl::ToDoubleMilliseconds(absl::Now() - sent));
        ++each[c].queries;
        if (!ok) ++each[c].failed;
      }
    });
  }
  absl::SleepFor(phase);
  stop = true;
  for (auto& t : threads) t.join();
  Way way;
  way.seconds = absl::ToDoubleSeconds(absl::Now() - start);
  way.cpu = CpuUse::Now(postmaster, {md}) - before;
  for (Way& w : each) {
    way.queries += w.queries;
    way.failed += w.failed;
    way.latencies_ms.insert(way.latencies_ms.end(), w.latencies_ms.begin(),
                            w.latencies_ms.end());
  }
  return way;
}

absl::Status Measure(pid_t postmaster) {
  ASSIGN_OR_RETURN(std::unique_ptr<test_util::TestDatabase> db,
                   test_util::TestDatabase::Create());
  RETURN_IF_ERROR(SeedChartHour(db->url()));
  storage::pg::PgTokenStore tokens(db->url());
  storage::TokenRequest viewer_request;
  viewer_request.role = storage::TokenRole::kViewer;
  ASSIGN_OR_RETURN(storage::CreatedToken viewer,
                   tokens.Create(viewer_request, absl::Now() + absl::Seconds(30)));
  ASSIGN_OR_RETURN(BenchMetricsd server, StartBenchMetricsd(absl::GetFlag(FLAGS_metricsd),
                                                            db->url(), {"--auth=required"}));
  const pid_t md = server.process->pid();
  const std::string token = "Bearer " + viewer.secret;
  const absl::Duration phase = absl::GetFlag(FLAGS_phase);

  const auto rest = [&] {
    return [connection = std::make_shared<Connection>(server.http_port), &token] {
      return connection->Get(kChartPath, token) == 200;
    };
  };
  const auto grpc_query = [&] {
    auto stub = std::shared_ptr<v1::QueryService::Stub>(v1::QueryService::NewStub(
        grpc::CreateChannel(server.grpc_target, grpc::InsecureChannelCredentials())));
    return [stub, &token] {
      v1::QuerySeriesRequest request;
      request.set_trial_id(1);
      request.set_max_points(300);
      grpc::ClientContext context;
      context.AddMetadata("authorization", token);
      context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(30)));
      v1::QuerySeriesResponse response;
      return stub->QuerySeries(&context, request, &response).ok();
    };
  };
  (void)Run(1, absl::Seconds(1), postmaster, md, rest);  // warm both doors
  (void)Run(1, absl::Seconds(1), postmaster, md, grpc_query);
  const int clients = absl::GetFlag(FLAGS_clients);
  std::vector<std::pair<std::string, Way>> ways;
  ways.emplace_back("rest", Run(1, phase, postmaster, md, rest));
  ways.emplace_back("grpc", Run(1, phase, postmaster, md, grpc_query));
  ways.emplace_back(absl::StrFormat("rest-%d", clients),
                    Run(clients, phase, postmaster, md, rest));
  server.process->Signal(SIGTERM);
  (void)server.process->Wait(absl::Seconds(60));

  std::printf("%-9s %10s %14s %9s %9s %7s\n", "way", "queries/s", "server us CPU",
              "p50 ms", "p99 ms", "failed");
  std::string json = "{";
  int64_t failed = 0;
  for (auto& [name, way] : ways) {
    std::printf("%-9s %10.0f %14.0f %9.2f %9.2f %7lld\n", name.c_str(),
                way.queries / way.seconds, way.ServerCpuUs(), way.Percentile(50),
                way.Percentile(99), static_cast<long long>(way.failed));
    absl::StrAppendFormat(&json,
                          "\"%s\": {\"per_s\": %.0f, \"server_cpu_us\": %.1f, "
                          "\"p50_ms\": %.3f, \"p99_ms\": %.3f}, ",
                          name, way.queries / way.seconds, way.ServerCpuUs(),
                          way.Percentile(50), way.Percentile(99));
    failed += way.failed;
  }
  const double ratio = ways[0].second.ServerCpuUs() / ways[1].second.ServerCpuUs();
  std::printf("\nREST's server CPU a chart query: %.2fx gRPC's\n", ratio);
  std::printf("%s\"rest_over_grpc_cpu\": %.3f}\n", json.c_str(), ratio);
  if (failed > 0) return absl::InternalError("some queries were not answered 200/OK");
  return absl::OkStatus();
}

}  // namespace
}  // namespace metrics::bench

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "A chart query's cost by each door (REST, gRPC, REST under many clients). Run it with "
      "bench/doors.sh.");
  absl::ParseCommandLine(argc, argv);
  const absl::StatusOr<pid_t> postmaster = metrics::bench::BenchPostmaster();
  if (!postmaster.ok()) {
    std::fprintf(stderr, "bench: %s\n", postmaster.status().ToString().c_str());
    return 1;
  }
  if (absl::Status done = metrics::bench::Measure(*postmaster); !done.ok()) {
    std::fprintf(stderr, "bench: %s\n", done.ToString().c_str());
    return 1;
  }
  return 0;
}
