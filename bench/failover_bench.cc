// The failover benchmark (docs/benchmarks.md): two metricsd processes on
// one database behind HAProxy, configured as deploy/haproxy.cfg is (TCP mode, least
// connections, GET /healthz checks every second, a server marked down after
// two failures has its sessions closed, a failed connect redispatched), but
// plaintext on loopback ports. A Reporter (the client library) sends a
// sample every 20 ms through HAProxy; the benchmark kills the metricsd
// holding its stream with SIGKILL, measures the time from the kill to the
// first acknowledgement from the other, starts the killed one again on its
// port, and repeats. Then it checks that every sample was stored exactly
// once. The database round does the same to the PostgreSQL primary: a
// pg_auto_failover formation of two nodes (tests/testing/auto_failover_cluster.h,
// with its shortened failure detection), one metricsd on its multi-host URL,
// the primary killed (SIGKILL, then stopped in immediate mode, in turn) and
// started again to rejoin as the standby, every round measured from the
// kill to the first acknowledgement of a sample recorded after it. Prints a
// line per round, then one JSON object as the last line.
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
#include "common/subprocess.h"
#include "storage/pg/testing/pg_checks.h"
#include "tests/testing/auto_failover_cluster.h"
#include "tests/testing/http_client.h"
#include "tests/testing/metricsd_process.h"
#include "tests/testing/test_database.h"
#include "tests/testing/trials.h"

ABSL_FLAG(int, rounds, 6, "Kills of the metricsd holding the stream.");
ABSL_FLAG(int, database_rounds, 4,
          "Kills of the PostgreSQL primary under pg_auto_failover (0: none).");

namespace metrics::bench {
namespace {

using test_util::HttpCall;
using test_util::MetricsdProcess;
using common::Subprocess;

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

// A Reporter recording a sample every 20 ms on a thread of its own until
// Finish, which flushes it and checks that every recorded sample was
// acknowledged and is stored once in `url`, printing the counts.
class SampleClient {
 public:
  static absl::StatusOr<std::unique_ptr<SampleClient>> Start(const std::string& target,
                                                            const std::string& agent) {
    client::ReporterOptions options;
    options.server_address = target;
    options.trial_id = 1;
    options.agent_id = agent;
    options.max_batch_age = absl::Milliseconds(20);
    ASSIGN_OR_RETURN(std::unique_ptr<client::Reporter> reporter,
                     client::Reporter::Create(std::move(options)));
    return std::unique_ptr<SampleClient>(new SampleClient(std::move(reporter)));
  }
  ~SampleClient() { Stop(); }

  client::ReporterStats stats() const { return reporter_->stats(); }

  // Whether every sample was acknowledged and stored exactly once.
  bool Finish(const std::string& url) {
    Stop();
    absl::Status unsent = reporter_->Shutdown(absl::Now() + absl::Seconds(30));
    const client::ReporterStats stats = reporter_->stats();
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
    return exact;
  }

 private:
  explicit SampleClient(std::unique_ptr<client::Reporter> reporter)
      : reporter_(std::move(reporter)) {
    recorder_ = std::thread([this] {
      for (int i = 0; recording_; ++i) {
        (void)reporter_->Record(absl::Now(), {{"cpu_util_simple", i % 100 * 1.0, "percent"}});
        absl::SleepFor(absl::Milliseconds(20));
      }
    });
  }
  void Stop() {
    recording_ = false;
    if (recorder_.joinable()) recorder_.join();
  }

  std::unique_ptr<client::Reporter> reporter_;
  std::atomic<bool> recording_{true};
  std::thread recorder_;
};

struct DatabaseRounds {
  std::vector<double> ms;
  bool exact = false;
  int failures = 0;
};

void Median(std::vector<double> ms, double& median, double& max) {
  std::sort(ms.begin(), ms.end());
  median = ms.empty() ? 0.0 : ms[ms.size() / 2];
  max = ms.empty() ? 0.0 : ms.back();
}

// The database round (see the top of this file).
DatabaseRounds RunDatabaseRounds(int rounds) {
  DatabaseRounds result;
  absl::StatusOr<std::unique_ptr<test_util::AutoFailoverCluster>> cluster =
      test_util::AutoFailoverCluster::Create(2);
  if (!cluster.ok()) {
    std::fprintf(stderr, "bench: pg_auto_failover: %s\n",
                 cluster.status().ToString().c_str());
    result.failures = 1;
    return result;
  }
  test_util::AutoFailoverCluster& c = **cluster;
  const std::string url = c.url("metrics");
  Replica server;
  server.grpc_port = FreePort();
  server.http_port = FreePort();
  absl::StatusOr<MetricsdProcess> p = test_util::StartMetricsd(
      {METRICSD_PATH, "--database-url=" + url, "--migrate",
       absl::StrCat("--grpc-address=127.0.0.1:", server.grpc_port),
       absl::StrCat("--http-address=127.0.0.1:", server.http_port), "--auth=off"});
  const std::string target = absl::StrCat("127.0.0.1:", server.grpc_port);
  if (!p.ok() ||
      !test_util::CreateTrial(
           grpc::CreateChannel(target, grpc::InsecureChannelCredentials()), 1)
           .ok()) {
    std::fprintf(stderr, "bench: metricsd on the formation: %s\n",
                 p.ok() ? "CreateTrial failed" : p.status().ToString().c_str());
    result.failures = 1;
    return result;
  }
  server.process = std::move(p->process);

  absl::StatusOr<std::unique_ptr<SampleClient>> client =
      SampleClient::Start(target, "database-failover");
  if (!client.ok()) {
    std::fprintf(stderr, "bench: %s\n", client.status().ToString().c_str());
    result.failures = 1;
    return result;
  }

  std::printf("\ndatabase failover: a sample every 20 ms to 1 metricsd on a pg_auto_failover "
              "formation of 2 nodes (synchronous standby); the primary dies\n");
  std::printf("  %5s %-24s %14s %10s\n", "round", "how", "to next ack ms", "rejoined s");
  int primary = 0;
  for (int round = 0; round < rounds; ++round) {
    absl::SleepFor(absl::Seconds(2));
    const bool kill = round % 2 == 0;
    absl::Status failed = kill ? c.Kill(primary) : c.StopImmediately(primary);
    // Samples recorded until now may have committed on the old primary.
    const client::ReporterStats before = (*client)->stats();
    const absl::Time killed = absl::Now();
    absl::Time acked = absl::InfinitePast();
    while (failed.ok() && absl::Now() - killed < absl::Seconds(90)) {
      if ((*client)->stats().acknowledged > before.recorded) {
        acked = absl::Now();
        break;
      }
      absl::SleepFor(absl::Milliseconds(2));
    }
    const int old = primary;
    primary = 1 - primary;
    const absl::Time restart = absl::Now();
    absl::Status rejoined = failed;
    if (rejoined.ok()) rejoined = c.Start(old);
    if (rejoined.ok()) rejoined = c.AwaitState(old, "secondary", absl::Seconds(120));
    if (rejoined.ok()) rejoined = c.AwaitState(primary, "primary", absl::Seconds(60));
    const char* how = kill ? "SIGKILL" : "immediate stop";
    if (acked == absl::InfinitePast() || !rejoined.ok()) {
      std::printf("  %5d %-24s  %s\n", round, how,
                  !rejoined.ok() ? rejoined.ToString().c_str() : "no ack in 90 s");
      ++result.failures;
    } else {
      result.ms.push_back(absl::ToDoubleMilliseconds(acked - killed));
      std::printf("  %5d %-24s %14.0f %10.1f\n", round, how, result.ms.back(),
                  absl::ToDoubleSeconds(absl::Now() - restart));
    }
    std::fflush(stdout);
    if (!rejoined.ok()) break;
  }
  result.exact = (*client)->Finish(url);
  server.process->Signal(SIGTERM);
  (void)server.process->Wait(absl::Seconds(30));
  return result;
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

  absl::StatusOr<std::unique_ptr<SampleClient>> client = SampleClient::Start(lb, "failover");
  if (!client.ok()) {
    std::fprintf(stderr, "bench: %s\n", client.status().ToString().c_str());
    return 1;
  }

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
    const client::ReporterStats before = (*client)->stats();
    replicas[holder].process->Signal(SIGKILL);
    const absl::Time killed = absl::Now();
    (void)replicas[holder].process->Wait(absl::Seconds(10));
    absl::Time acked = absl::InfinitePast();
    while (absl::Now() - killed < absl::Seconds(30)) {
      const client::ReporterStats now = (*client)->stats();
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
  const bool exact = (*client)->Finish(url);
  for (Replica& r : replicas) r.process->Signal(SIGTERM);
  (*haproxy)->Signal(SIGTERM);
  for (Replica& r : replicas) (void)r.process->Wait(absl::Seconds(30));
  (void)(*haproxy)->Wait(absl::Seconds(10));
  std::remove(config_path.c_str());

  DatabaseRounds database;
  database.exact = true;
  if (const int n = absl::GetFlag(FLAGS_database_rounds); n > 0) {
    database = RunDatabaseRounds(n);
  }
  double median = 0, max = 0, db_median = 0, db_max = 0;
  Median(ms, median, max);
  Median(database.ms, db_median, db_max);
  std::printf("{\"rounds\": %zu, \"failover_median_ms\": %.0f, "
              "\"failover_max_ms\": %.0f, \"exactly_once\": %s, "
              "\"database_rounds\": %zu, \"database_failover_median_ms\": %.0f, "
              "\"database_failover_max_ms\": %.0f, \"database_exactly_once\": %s}\n",
              ms.size(), median, max, exact ? "true" : "false", database.ms.size(),
              db_median, db_max, database.exact ? "true" : "false");
  return exact && failures == 0 && database.exact && database.failures == 0 ? 0 : 1;
}

}  // namespace
}  // namespace metrics::bench

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  return metrics::bench::Run();
}
