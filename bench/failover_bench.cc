// The failover benchmark (docs/benchmarks.md): two metricsd processes on
// one database behind HAProxy, configured as deploy/haproxy.cfg is (TCP mode, least
// connections, GET /healthz checks every second, a server marked down after
// two failures has its sessions closed, a failed connect redispatched), but
// plaintext on loopback ports. A Reporter (the client library) sends a
// sample every 20 ms through HAProxy; the benchmark kills the metricsd
// holding its stream with SIGKILL, measures the time from the kill to the
// first acknowledgement from the other, starts the killed one again on its
// port, and repeats. Then it checks that every sample was stored exactly
// once. Prints a line per round, then one JSON object as the last line.
#include <arpa/inet.h>
#include <grpcpp/create_channel.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "client/reporter.h"
#include "common/status_macros.h"
#include "storage/pg/testing/pg_checks.h"
#include "tests/testing/http_client.h"
#include "tests/testing/metricsd_process.h"
#include "tests/testing/subprocess.h"
#include "tests/testing/test_database.h"
#include "tests/testing/trials.h"

ABSL_FLAG(int, rounds, 6, "Kills of the metricsd holding the stream.");

namespace metrics::bench {
namespace {

using test_util::HttpCall;
using test_util::MetricsdProcess;
using test_util::Subprocess;

// A loopback port free now (the kernel's pick for port 0).
int FreePort() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t size = sizeof(address);
  int port = 0;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &size) == 0) {
    port = ntohs(address.sin_port);
  }
  ::close(fd);
  return port;
}

struct Replica {
  int grpc_port = 0, http_port = 0;
  std::unique_ptr<Subprocess> process;
};

absl::Status Start(const std::string& url, Replica& r) {
  ASSIGN_OR_RETURN(
      MetricsdProcess p,
      test_util::StartMetricsd(
          {METRICSD_PATH, "--database-url=" + url,
           absl::StrCat("--grpc-address=127.0.0.1:", r.grpc_port),
           absl::StrCat("--http-address=127.0.0.1:", r.http_port), "--auth=off"}));
  r.process = std::move(p.process);
  return absl::OkStatus();
}

// Whether `r` holds a StreamSystemMetrics call now (its /metrics gauge).
bool HoldsAStream(const Replica& r) {
  absl::StatusOr<test_util::HttpResult> page = HttpCall(r.http_port, "GET", "/metrics");
  return page.ok() &&
         page->body.find("metricsd_open_streams{rpc=\"StreamSystemMetrics\"} 1\n") !=
             std::string::npos;
}

std::string HaproxyConfig(int grpc_port, const std::vector<Replica>& replicas) {
  std::string config = absl::StrCat(
      "global\n  log stdout format raw local0 err\n"
      "defaults\n  mode tcp\n  timeout connect 5s\n  timeout client 1h\n"
      "  timeout server 1h\n  option redispatch\n  retries 3\n"
      "  default-server inter 1s fall 2 rise 2 on-marked-down shutdown-sessions\n"
      "frontend grpc\n  bind 127.0.0.1:", grpc_port,
      "\n  default_backend metricsd_grpc\n"
      "backend metricsd_grpc\n  balance leastconn\n  option httpchk GET /healthz\n"
      "  http-check expect status 200\n");
  for (size_t i = 0; i < replicas.size(); ++i) {
    absl::StrAppend(&config, "  server metricsd-", i + 1, " 127.0.0.1:",
                    replicas[i].grpc_port, " check port ", replicas[i].http_port,
                    "\n");
  }
  return config;
}

int Run() {
  absl::StatusOr<std::unique_ptr<test_util::TestDatabase>> db =
      test_util::TestDatabase::Create();
  if (!db.ok()) {
    std::fprintf(stderr, "bench: %s\n", db.status().ToString().c_str());
    return 1;
  }
  const std::string url = (*db)->url();
  std::vector<Replica> replicas(2);
  for (Replica& r : replicas) {
    r.grpc_port = FreePort();
    r.http_port = FreePort();
    if (absl::Status s = Start(url, r); !s.ok()) {
      std::fprintf(stderr, "bench: metricsd: %s\n", s.ToString().c_str());
      return 1;
    }
  }
  const int lb_port = FreePort();
  const std::string config_path =
      absl::StrCat("/tmp/failover-bench-", ::getpid(), ".cfg");
  std::ofstream(config_path) << HaproxyConfig(lb_port, replicas);
  absl::StatusOr<std::unique_ptr<Subprocess>> haproxy =
      Subprocess::Start({"/usr/sbin/haproxy", "-db", "-f", config_path});
  if (!haproxy.ok()) {
    std::fprintf(stderr, "bench: haproxy: %s (setup.sh installs it)\n",
                 haproxy.status().ToString().c_str());
    return 1;
  }
  absl::SleepFor(absl::Seconds(3));  // both servers checked up
  const std::string lb = absl::StrCat("127.0.0.1:", lb_port);
  if (absl::Status s = test_util::CreateTrial(
          grpc::CreateChannel(lb, grpc::InsecureChannelCredentials()), 1);
      !s.ok()) {
    std::fprintf(stderr, "bench: CreateTrial: %s\n", s.ToString().c_str());
    return 1;
  }

  client::ReporterOptions options;
  options.server_address = lb;
  options.trial_id = 1;
  options.agent_id = "failover";
  options.max_batch_age = absl::Milliseconds(20);
  absl::StatusOr<std::unique_ptr<client::Reporter>> reporter =
      client::Reporter::Create(std::move(options));
  if (!reporter.ok()) {
    std::fprintf(stderr, "bench: %s\n", reporter.status().ToString().c_str());
    return 1;
  }
  std::atomic<bool> recording{true};
  std::thread recorder([&] {
    for (int i = 0; recording; ++i) {
      (void)(*reporter)->Record(absl::Now(), {{"cpu_util_simple", i % 100 * 1.0, "percent"}});
      absl::SleepFor(absl::Milliseconds(20));
    }
  });

  std::printf("failover: a sample every 20 ms through HAProxy to 2 metricsd; "
              "the one holding the stream is killed (SIGKILL)\n");
  std::printf("  %5s %8s %14s\n", "round", "killed", "to next ack ms");
  std::vector<double> ms;
  int failures = 0;
  for (int round = 0; round < absl::GetFlag(FLAGS_rounds); ++round) {
    absl::SleepFor(absl::Seconds(2));  // steady, and the other server up
    int holder = -1;
    for (int i = 0; i < 2; ++i) {
      if (HoldsAStream(replicas[i])) holder = i;
    }
    if (holder < 0) {
      std::printf("  %5d: no server holds the stream; skipped\n", round);
      ++failures;
      continue;
    }
    const client::ReporterStats before = (*reporter)->stats();
    replicas[holder].process->Signal(SIGKILL);
    const absl::Time killed = absl::Now();
    (void)replicas[holder].process->Wait(absl::Seconds(10));
    absl::Time acked = absl::InfinitePast();
    while (absl::Now() - killed < absl::Seconds(30)) {
      const client::ReporterStats now = (*reporter)->stats();
      if (now.connections > before.connections &&
          now.acknowledged > before.acknowledged) {
        acked = absl::Now();
        break;
      }
      absl::SleepFor(absl::Milliseconds(2));
    }
    if (acked == absl::InfinitePast()) {
      std::printf("  %5d %8d  no ack in 30 s\n", round, holder + 1);
      ++failures;
    } else {
      ms.push_back(absl::ToDoubleMilliseconds(acked - killed));
      std::printf("  %5d %8d %14.0f\n", round, holder + 1, ms.back());
    }
    std::fflush(stdout);
    if (absl::Status s = Start(url, replicas[holder]); !s.ok()) {
      std::fprintf(stderr, "bench: restart: %s\n", s.ToString().c_str());
      return 1;
    }
  }
  recording = false;
  recorder.join();
  absl::Status unsent = (*reporter)->Shutdown(absl::Now() + absl::Seconds(30));
  const client::ReporterStats stats = (*reporter)->stats();
  absl::StatusOr<int64_t> stored = storage::pg::test_util::CountRawValues(url, 1);
  absl::StatusOr<int64_t> repeated =
      storage::pg::test_util::CountRepeatedReports(url, 1);
  const bool exact = unsent.ok() && stored.ok() && repeated.ok() &&
                     *stored == stats.recorded && *repeated == 0 &&
                     stats.acknowledged == stats.recorded;
  std::printf("  samples: %lld recorded, %lld acknowledged, %lld stored, "
              "%lld stored twice, %lld connections: %s\n",
              static_cast<long long>(stats.recorded),
              static_cast<long long>(stats.acknowledged),
              static_cast<long long>(stored.ok() ? *stored : -1),
              static_cast<long long>(repeated.ok() ? *repeated : -1),
              static_cast<long long>(stats.connections),
              exact ? "each stored exactly once" : "NOT EXACT");
  for (Replica& r : replicas) r.process->Signal(SIGTERM);
  (*haproxy)->Signal(SIGTERM);
  for (Replica& r : replicas) (void)r.process->Wait(absl::Seconds(30));
  (void)(*haproxy)->Wait(absl::Seconds(10));
  std::remove(config_path.c_str());

  std::sort(ms.begin(), ms.end());
  std::printf("{\"rounds\": %zu, \"failover_median_ms\": %.0f, "
              "\"failover_max_ms\": %.0f, \"exactly_once\": %s}\n",
              ms.size(), ms.empty() ? 0.0 : ms[ms.size() / 2],
              ms.empty() ? 0.0 : ms.back(), exact ? "true" : "false");
  return exact && failures == 0 ? 0 : 1;
}

}  // namespace
}  // namespace metrics::bench

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  return metrics::bench::Run();
}
