// What a flood of bad tokens costs, and what it leaves a good client: four
// (--flooders) clients send GET /api/v1/trials/1 with a distinct random
// token each time, as fast as keep-alive connections go, while one client
// with a good viewer token asks for the same trial. Per configuration (the
// per-address limit on, as shipped; and off, the refused-token cache alone)
// it measures, each phase --phase long:
//   chart   the good client's chart queries alone (1 h of 4 series): CPU a query
//   refused the flooders alone: CPU (metricsd + PostgreSQL) a refused request
//   alone   the good client alone: requests a second, p99
//   flood   the good client beside the flooders: the same, and the CPU the
//           flooders took
// and, with --flood, metricsd's RSS through a flood of that length without
// the limit (one distinct token a request, each then remembered: a million
// in 5 minutes at this machine's rate).
// Run it with bench/auth_flood.sh; the last line is JSON.
#include <signal.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <fstream>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <grpcpp/create_channel.h>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "bench/bench_http.h"
#include "bench/bench_loads.h"
#include "bench/cpu_time.h"
#include "common/status_macros.h"
#include "proto/metrics/v1/trials.grpc.pb.h"
#include "storage/pg/pg_token_store.h"
#include "tests/testing/test_database.h"

ABSL_FLAG(int, flooders, 4, "Clients sending bad tokens.");
ABSL_FLAG(absl::Duration, phase, absl::Seconds(10), "How long each phase runs.");
ABSL_FLAG(std::string, metricsd, METRICSD_PATH, "The metricsd to measure.");
ABSL_FLAG(absl::Duration, flood, absl::ZeroDuration(),
          "A long flood for the RSS figure (5m for the million tokens); 0: none.");

namespace metrics::bench {
namespace {

// A client's requests over one phase.
struct Asked {
  int64_t requests = 0;
  int64_t failed = 0;  // not the expected status
  std::vector<double> latencies_ms;
  double P99() {
    if (latencies_ms.empty()) return 0;
    std::sort(latencies_ms.begin(), latencies_ms.end());
    return latencies_ms[std::min(latencies_ms.size() - 1, latencies_ms.size() * 99 / 100)];
  }
};

// Asks `path` with `authorization()` until `stop`, expecting `status()`.
Asked Ask(int port, const std::string& path, const std::function<std::string()>& authorization,
          const std::function<bool(int)>& expected, const std::atomic<bool>& stop,
          bool timed) {
  Connection connection(port);
  Asked asked;
  while (!stop.load(std::memory_order_relaxed)) {
    const absl::Time start = absl::Now();
    const int status = connection.Get(path, authorization());
    if (timed) asked.latencies_ms.push_back(absl::ToDoubleMilliseconds(absl::Now() - start));
    ++asked.requests;
    if (!expected(status)) ++asked.failed;
  }
  return asked;
}

// The same over gRPC: TrialService.GetTrial of trial 1 on one channel,
// expecting `expected(code)`.
Asked AskGrpc(const std::string& target, const std::function<std::string()>& authorization,
              const std::function<bool(grpc::StatusCode)>& expected,
              const std::atomic<bool>& stop, bool timed) {
  auto stub = v1::TrialService::NewStub(
      grpc::CreateChannel(target, grpc::InsecureChannelCredentials()));
  Asked asked;
  v1::GetTrialRequest request;
  request.set_trial_id(1);
  while (!stop.load(std::memory_order_relaxed)) {
    const absl::Time start = absl::Now();
    grpc::ClientContext context;
    context.AddMetadata("authorization", authorization());
    context.set_deadline(absl::ToChronoTime(start + absl::Seconds(10)));
    v1::Trial trial;
    const grpc::Status status = stub->GetTrial(&context, request, &trial);
    if (timed) asked.latencies_ms.push_back(absl::ToDoubleMilliseconds(absl::Now() - start));
    ++asked.requests;
    if (!expected(status.error_code())) ++asked.failed;
  }
  return asked;
}

std::string RandomToken(std::mt19937_64& random) {
  return absl::StrFormat("Bearer mtk_%016x%016x%016x%016x", random(), random(), random(),
                         random());
}

int64_t RssKib(pid_t pid) {
  std::ifstream status(absl::StrCat("/proc/", pid, "/status"));
  std::string line;
  while (std::getline(status, line)) {
    int64_t kib = 0;
    if (line.rfind("VmRSS:", 0) == 0 &&
        absl::SimpleAtoi(absl::StripAsciiWhitespace(line.substr(6, line.size() - 9)), &kib)) {
      return kib;
    }
  }
  return 0;
}

struct Figures {
  double chart_cpu_us = 0, refused_cpu_us = 0, refused_per_s = 0;
  double alone_per_s = 0, alone_p99_ms = 0, flood_per_s = 0, flood_p99_ms = 0;
  double flood_refused_per_s = 0, flooders_cpu_share = 0;
  int64_t rss_start_kib = 0, rss_max_kib = 0, rss_end_kib = 0, long_flood_requests = 0;
};

// `grpc`: the flooders and the good client's trial asks over gRPC (the chart
// over HTTP still, the yardstick).
absl::StatusOr<Figures> Measure(const std::string& name, const std::vector<std::string>& flags,
                                bool grpc, pid_t postmaster) {
  ASSIGN_OR_RETURN(std::unique_ptr<test_util::TestDatabase> db,
                   test_util::TestDatabase::Create());
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  RETURN_IF_ERROR(SeedChartHour(db->url()));
  storage::pg::PgTokenStore tokens(db->url());
  storage::TokenRequest viewer_request;
  viewer_request.role = storage::TokenRole::kViewer;
  ASSIGN_OR_RETURN(storage::CreatedToken viewer, tokens.Create(viewer_request, deadline));
  std::vector<std::string> all_flags = {"--auth=required"};
  all_flags.insert(all_flags.end(), flags.begin(), flags.end());
  ASSIGN_OR_RETURN(BenchMetricsd server, StartBenchMetricsd(absl::GetFlag(FLAGS_metricsd), db->url(), all_flags));
  const pid_t md = server.process->pid();
  const std::string good = "Bearer " + viewer.secret;
  const absl::Duration phase = absl::GetFlag(FLAGS_phase);
  const int flooders = absl::GetFlag(FLAGS_flooders);
  const auto good_status = [](int s) { return s == 200; };
  const auto refused_status = [](int s) { return s == 401 || s == 429; };
  const auto good_code = [](grpc::StatusCode c) { return c == grpc::StatusCode::OK; };
  const auto refused_code = [](grpc::StatusCode c) {
    return c == grpc::StatusCode::UNAUTHENTICATED || c == grpc::StatusCode::RESOURCE_EXHAUSTED;
  };
  static const std::string kTrialPath = "/api/v1/trials/1";

  // Runs the good client (with `path`) and/or the flooders for `length`.
  struct Run {
    Asked good, bad;
    CpuUse cpu;
    double seconds = 0;
  };
  const auto run = [&](bool with_good, const std::string& path, bool with_flood,
                       absl::Duration length) {
    std::atomic<bool> stop{false};
    Run r;
    std::vector<Asked> bad(flooders);
    std::vector<std::thread> threads;
    const CpuUse before = CpuUse::Now(postmaster, {md});
    const absl::Time start = absl::Now();
    if (with_flood) {
      for (int f = 0; f < flooders; ++f) {
        threads.emplace_back([&, f] {
          std::mt19937_64 random(f * 7919 + absl::ToUnixNanos(absl::Now()));
          const auto token = [&] { return RandomToken(random); };
          bad[f] = grpc ? AskGrpc(server.grpc_target, token, refused_code, stop, false)
                        : Ask(server.http_port, "/api/v1/trials/1", token, refused_status,
                              stop, false);
        });
      }
    }
    if (with_good) {
      threads.emplace_back([&] {
        const auto token = [&] { return good; };
        r.good = grpc && path == kTrialPath
                     ? AskGrpc(server.grpc_target, token, good_code, stop, true)
                     : Ask(server.http_port, path, token, good_status, stop, true);
      });
    }
    absl::SleepFor(length);
    stop = true;
    for (auto& t : threads) t.join();
    r.seconds = absl::ToDoubleSeconds(absl::Now() - start);
    r.cpu = CpuUse::Now(postmaster, {md}) - before;
    for (const Asked& a : bad) {
      r.bad.requests += a.requests;
      r.bad.failed += a.failed;
    }
    return r;
  };
  const std::string chart = "/api/v1/trials/1/metrics/system?maxPoints=300";
  Figures f;
  // Warm both paths once.
  (void)run(true, chart, true, absl::Seconds(1));
  Run charts = run(true, chart, false, phase);
  Run refused = run(false, "", true, phase);
  Run alone = run(true, kTrialPath, false, phase);
  Run flood = run(true, kTrialPath, true, phase);
  const auto server_us = [](const Run& r, int64_t n) {
    return n == 0 ? 0 : 1e6 * (r.cpu.metricsd + r.cpu.postgres) / n;
  };
  f.chart_cpu_us = server_us(charts, charts.good.requests);
  f.refused_cpu_us = server_us(refused, refused.bad.requests);
  f.refused_per_s = refused.bad.requests / refused.seconds;
  f.alone_per_s = alone.good.requests / alone.seconds;
  f.alone_p99_ms = alone.good.P99();
  f.flood_per_s = flood.good.requests / flood.seconds;
  f.flood_p99_ms = flood.good.P99();
  f.flood_refused_per_s = flood.bad.requests / flood.seconds;
  f.flooders_cpu_share = flood.cpu.client / flood.seconds;
  const int64_t wrong = charts.good.failed + refused.bad.failed + alone.good.failed +
                        flood.good.failed + flood.bad.failed;
  std::printf(
      "%-14s chart %.0f us CPU/query; refused %.0f us CPU/request (%.1f%% of a chart query, "
      "%.0f/s); good client alone %.0f/s p99 %.2f ms, beside %d flooders (%.0f refused/s, "
      "they took %.2f cores) %.0f/s p99 %.2f ms: %.2f of its throughput, p99 %.1fx; "
      "unexpected answers %lld\n",
      name.c_str(), f.chart_cpu_us, f.refused_cpu_us, 100 * f.refused_cpu_us / f.chart_cpu_us,
      f.refused_per_s, f.alone_per_s, f.alone_p99_ms, flooders, f.flood_refused_per_s,
      f.flooders_cpu_share, f.flood_per_s, f.flood_p99_ms, f.flood_per_s / f.alone_per_s,
      f.flood_p99_ms / f.alone_p99_ms, static_cast<long long>(wrong));
  // Without the limit every refusal reaches the refused-token cache: the
  // configuration whose memory a long flood could grow.
  if (const absl::Duration length = absl::GetFlag(FLAGS_flood);
      length > absl::ZeroDuration() && name == "no-limit") {
    f.rss_start_kib = f.rss_max_kib = RssKib(md);
    std::atomic<bool> done{false};
    std::thread sampler([&] {
      while (!done) {
        absl::SleepFor(absl::Seconds(1));
        f.rss_max_kib = std::max(f.rss_max_kib, RssKib(md));
      }
    });
    Run long_flood = run(false, "", true, length);
    done = true;
    sampler.join();
    f.rss_end_kib = RssKib(md);
    f.long_flood_requests = long_flood.bad.requests;
    std::printf("%-14s flood of %s: %lld distinct tokens; metricsd RSS %lld KiB before, "
                "%lld at most, %lld after\n",
                name.c_str(), absl::FormatDuration(length).c_str(),
                static_cast<long long>(f.long_flood_requests),
                static_cast<long long>(f.rss_start_kib), static_cast<long long>(f.rss_max_kib),
                static_cast<long long>(f.rss_end_kib));
  }
  server.process->Signal(SIGTERM);
  (void)server.process->Wait(absl::Seconds(60));
  if (wrong > 0) return absl::InternalError(absl::StrCat(name, ": unexpected answers"));
  return f;
}

std::string Json(const std::string& name, const Figures& f) {
  return absl::StrFormat(
      "\"%s\": {\"chart_cpu_us\": %.1f, \"refused_cpu_us\": %.2f, \"refused_cost_ratio\": %.4f, "
      "\"good_alone_per_s\": %.0f, \"good_alone_p99_ms\": %.2f, \"good_flood_per_s\": %.0f, "
      "\"good_flood_p99_ms\": %.2f, \"throughput_kept\": %.3f, \"p99_ratio\": %.2f, "
      "\"flooders_cores\": %.2f, \"flood_requests\": %lld, \"rss_start_kib\": %lld, "
      "\"rss_max_kib\": %lld, \"rss_end_kib\": %lld}",
      name, f.chart_cpu_us, f.refused_cpu_us, f.refused_cpu_us / f.chart_cpu_us, f.alone_per_s,
      f.alone_p99_ms, f.flood_per_s, f.flood_p99_ms, f.flood_per_s / f.alone_per_s,
      f.flood_p99_ms / f.alone_p99_ms, f.flooders_cpu_share,
      static_cast<long long>(f.long_flood_requests), static_cast<long long>(f.rss_start_kib),
      static_cast<long long>(f.rss_max_kib), static_cast<long long>(f.rss_end_kib));
}

int Main() {
  const absl::StatusOr<pid_t> postmaster = BenchPostmaster();
  if (!postmaster.ok()) {
    std::fprintf(stderr, "bench: %s\n", postmaster.status().ToString().c_str());
    return 1;
  }
  std::string json = "{";
  for (const auto& [name, flags] :
       {std::pair<std::string, std::vector<std::string>>("limit", {}),
        {"no-limit", {"--auth-failure-burst=0"}},
        {"grpc-limit", {}}}) {
    absl::StatusOr<Figures> f =
        Measure(name, flags, name.rfind("grpc", 0) == 0, *postmaster);
    if (!f.ok()) {
      std::fprintf(stderr, "bench: %s\n", f.status().ToString().c_str());
      return 1;
    }
    if (json.size() > 1) json += ", ";
    json += Json(name, *f);
  }
  std::printf("%s}\n", json.c_str());
  return 0;
}

}  // namespace
}  // namespace metrics::bench

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "What a flood of bad tokens costs metricsd and PostgreSQL, and what it leaves a good "
      "client. Run it with bench/auth_flood.sh.");
  absl::ParseCommandLine(argc, argv);
  return metrics::bench::Main();
}
