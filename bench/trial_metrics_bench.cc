// The platform harness's reports benchmark (docs/benchmarks.md): what
// metricsd and PostgreSQL spend a value on ReportTrialMetrics, beside the
// service's own stream, the same values each way, in one run, each into a
// metricsd of its own on a fresh database:
//   stream   StreamSystemMetrics, one report of an agent's 25 values a
//            batch (what metrics-agent sends each second);
//   harness  POST /api/v1/trials/{id}/metrics, as the platform's harness
//            reports an aggregation period: five reports (gpu with 8 GPUs,
//            cpu, memory, disk with two mounts, network: 25 values), one
//            after another on a kept-alive connection per agent, its JSON
//            as the harness's bindings write it.
// Bodies and batches are built before the clock. CPU is read from /proc
// for PostgreSQL, metricsd and this process (the client); throughput is
// values from the first send to the last answer. Rounds alternate the
// order; each way's best round counts. Prints a table, then one JSON object
// as the last line.
#include <grpcpp/create_channel.h>
#include <signal.h>

#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include <algorithm>
#include <cstdio>
#include <map>
#include <thread>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "bench/bench_loads.h"
#include "bench/cpu_time.h"
#include "common/status_macros.h"
#include "proto/metrics/v1/ingest.grpc.pb.h"
#include "storage/pg/testing/pg_checks.h"
#include "tests/testing/realistic_batch.h"
#include "tests/testing/resending_streamer.h"
#include "tests/testing/test_database.h"
#include "tests/testing/trials.h"

ABSL_FLAG(int, agents, 20, "Agents reporting at once, each its own stream or connection.");
ABSL_FLAG(int, periods, 200, "Aggregation periods (25 values each) per agent and load.");
ABSL_FLAG(int, rounds, 2, "Rounds of both loads; each way's best counts.");
ABSL_FLAG(std::string, metricsd, METRICSD_PATH, "The metricsd to measure.");

namespace metrics::bench {
namespace {

namespace beast = boost::beast;
namespace http = beast::http;
using test_util::TestDatabase;

constexpr int kTrial = 1;
constexpr int kValuesPerPeriod = 25;

// An agent's load in both ways' forms.
struct Work {
  std::vector<v1::SystemMetricsBatch> batches;
  std::vector<std::string> bodies;  // five a period
};

std::string IsoTime(absl::Time t) {
  return absl::FormatTime("%Y-%m-%dT%H:%M:%E6S+00:00", t, absl::UTCTimeZone());
}

// The harness's body of one group's report (0.32's form).
std::string Body(absl::string_view group, const std::string& agent, const std::string& avg,
                 absl::Time t) {
  return absl::StrCat(R"({"group": ")", group, R"(", "metrics": {"metrics": {"avgMetrics": {")",
                      agent, R"(": )", avg, R"(}, "batchMetrics": null}, "trialId": )", kTrial,
                      R"(, "trialRunId": 1, "reportTime": ")", IsoTime(t),
                      R"(", "stepsCompleted": null}})");
}

std::vector<Work> BuildWork(int agents, int periods) {
  std::vector<Work> work(agents);
  const absl::Time history = absl::Now() - absl::Hours(24 * 30);
  for (int a = 0; a < agents; ++a) {
    const std::string agent = absl::StrCat("agent-", a);
    for (int p = 0; p < periods; ++p) {
      const absl::Time t = history + absl::Seconds(10 * p);
      v1::SystemMetricsBatch batch;
      batch.set_trial_id(kTrial);
      batch.set_agent_id(agent);
      batch.set_sequence(p + 1);
      test_util::DeclareRealisticSeries(batch);
      test_util::AddRealisticReport(batch, t, p);
      work[a].batches.push_back(std::move(batch));
      const double v = p % 100;
      std::string gpus = "{";
      for (int g = 0; g < 8; ++g) {
        absl::StrAppend(&gpus, g ? ", " : "", "\"GPU-", a, "-", g, R"(": {"gpu_util": )",
                        v + g, R"(, "gpu_free_memory": )", 7.9e10 - v, "}");
      }
      gpus += "}";
      // Each report timed when the harness makes it, microseconds apart.
      int i = 0;
      for (const auto& [group, avg] : std::vector<std::pair<const char*, std::string>>{
               {"gpu", gpus},
               {"cpu", absl::StrCat(R"({"cpu_util_simple": )", v + 0.5, "}")},
               {"memory", absl::StrCat(R"({"memory_free": )", 2.5e10 + v, "}")},
               {"disk", absl::StrCat(R"({"disk_iops": )", v, R"(, "disk_throughput_read": )",
                                     1e6 + v, R"(, "disk_throughput_write": )", 2e6 + v,
                                     R"(, "/": {"disk_util": 55.5}, )",
                                     R"("/run/determined/workdir/shared_fs": {"disk_util": 7}})")},
               {"network", absl::StrCat(R"({"net_throughput_sent": )", 1e5 + v,
                                        R"(, "net_throughput_recv": )", 2e5 + v, "}")}}) {
        work[a].bodies.push_back(Body(group, agent, avg, t + absl::Microseconds(17 * i++)));
      }
    }
  }
  return work;
}

// Posts `bodies` one after another on one kept-alive connection, as the
// harness's session does; the first failure.
absl::Status PostAll(int port, const std::vector<std::string>& bodies) {
  boost::asio::io_context io;
  beast::tcp_stream stream(io);
  beast::error_code ec;
  stream.connect(boost::asio::ip::tcp::endpoint(boost::asio::ip::make_address("127.0.0.1"),
                                                static_cast<unsigned short>(port)),
                 ec);
  if (ec) return absl::UnavailableError(ec.message());
  beast::flat_buffer buffer;
  const std::string target = absl::StrCat("/api/v1/trials/", kTrial, "/metrics");
  for (const std::string& body : bodies) {
    http::request<http::string_body> request{http::verb::post, target, 11};
    request.set(http::field::host, "127.0.0.1");
    request.set(http::field::content_type, "application/json");
    request.body() = body;
    request.prepare_payload();
    http::write(stream, request, ec);
    http::response<http::string_body> response;
    if (!ec) http::read(stream, buffer, response, ec);
    if (ec) return absl::UnavailableError(ec.message());
    if (response.result_int() != 200) {
      return absl::InternalError(absl::StrCat(response.result_int(), " ", response.body()));
    }
  }
  return absl::OkStatus();
}

using Load = WayLoad;

absl::StatusOr<Load> RunLoad(absl::string_view way, const std::vector<Work>& work,
                             pid_t postmaster) {
  ASSIGN_OR_RETURN(std::unique_ptr<TestDatabase> db, TestDatabase::Create());
  ASSIGN_OR_RETURN(BenchMetricsd server,
                   StartBenchMetricsd(absl::GetFlag(FLAGS_metricsd), db->url()));
  auto channel = grpc::CreateChannel(server.grpc_target, grpc::InsecureChannelCredentials());
  RETURN_IF_ERROR(test_util::CreateTrial(channel, kTrial));
  absl::Mutex mu;
  std::string failure;
  auto fail = [&](const absl::Status& status) {
    absl::MutexLock lock(&mu);
    if (failure.empty()) failure = status.ToString();
  };
  Load load;
  const CpuUse before = CpuUse::Now(postmaster, {server.process->pid()});
  const absl::Time start = absl::Now();
  std::vector<std::thread> agents;
  for (size_t a = 0; a < work.size(); ++a) {
    agents.emplace_back([&, a] {
      if (way == "harness") {
        if (absl::Status s = PostAll(server.http_port, work[a].bodies); !s.ok()) fail(s);
        return;
      }
      test_util::StreamerOptions options;
      options.stream_id = absl::StrCat("agent-", a);
      options.trial_id = kTrial;
      options.window = 16;
      options.timeout = absl::Minutes(10);
      test_util::ResendingStreamer streamer([&] { return server.grpc_target; }, options);
      if (absl::Status s = streamer.SendAll(work[a].batches); !s.ok()) fail(s);
    });
  }
  for (auto& t : agents) t.join();
  load.seconds = absl::ToDoubleSeconds(absl::Now() - start);
  load.cpu = CpuUse::Now(postmaster, {server.process->pid()}) - before;
  load.failure = failure;
  server.process->Signal(SIGTERM);
  (void)server.process->Wait(absl::Seconds(60));
  load.stored = storage::pg::test_util::CountRawValues(db->url(), kTrial).value_or(-1);
  return load;
}

int Run() {
  const int agents = absl::GetFlag(FLAGS_agents);
  const int periods = absl::GetFlag(FLAGS_periods);
  const std::vector<Work> work = BuildWork(agents, periods);
  const int64_t values = int64_t{agents} * periods * kValuesPerPeriod;
  const absl::StatusOr<pid_t> found = BenchPostmaster();
  if (!found.ok()) {
    std::fprintf(stderr, "bench: %s\n", found.status().ToString().c_str());
    return 1;
  }
  const pid_t postmaster = *found;
  std::printf("%d agents x %d periods x %d values = %lld values a load (harness: 5 reports "
              "a period)\n\n",
              agents, periods, kValuesPerPeriod, static_cast<long long>(values));
  bool ok = true;
  absl::StatusOr<std::map<std::string, Load>> rounds = RunRounds(
      {"stream", "harness"}, absl::GetFlag(FLAGS_rounds), values, 8,
      [&](const std::string& way) { return RunLoad(way, work, postmaster); }, ok);
  if (!rounds.ok()) {
    std::fprintf(stderr, "bench: %s\n", rounds.status().ToString().c_str());
    return 1;
  }
  std::map<std::string, Load>& best = *rounds;
  // The server's side (metricsd and PostgreSQL) is what an operator pays.
  const Load& stream = best["stream"];
  const Load& harness = best["harness"];
  auto server_ns = [values](const Load& l) {
    return 1e9 * (l.cpu.metricsd + l.cpu.postgres) / values;
  };
  const double ratio = server_ns(harness) / server_ns(stream);
  std::printf("\nbest of each: stream %.0f values/s, server CPU %.0f ns a value; harness %.0f "
              "values/s, server CPU %.0f ns a value (metricsd %.0f, PostgreSQL %.0f): %.2fx "
              "the stream's\n",
              values / stream.seconds, server_ns(stream), values / harness.seconds,
              server_ns(harness), 1e9 * harness.cpu.metricsd / values,
              1e9 * harness.cpu.postgres / values, ratio);
  std::printf(
      "{\"values\": %lld, \"stream_values_per_s\": %.0f, \"stream_server_cpu_ns_per_value\": "
      "%.0f, \"harness_values_per_s\": %.0f, \"harness_server_cpu_ns_per_value\": %.0f, "
      "\"harness_metricsd_cpu_ns_per_value\": %.0f, \"harness_postgres_cpu_ns_per_value\": "
      "%.0f, \"harness_server_cpu_ratio\": %.3f, \"all_stored\": %s}\n",
      static_cast<long long>(values), values / stream.seconds, server_ns(stream),
      values / harness.seconds, server_ns(harness), 1e9 * harness.cpu.metricsd / values,
      1e9 * harness.cpu.postgres / values, ratio, ok ? "true" : "false");
  return ok ? 0 : 1;
}

}  // namespace
}  // namespace metrics::bench

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "What a report of the platform's harness (ReportTrialMetrics) costs the server a value, "
      "beside the service's stream. Run it with bench/trial_metrics.sh.");
  absl::ParseCommandLine(argc, argv);
  return metrics::bench::Run();
}
