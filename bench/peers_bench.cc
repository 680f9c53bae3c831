// The peers benchmark (docs/benchmarks.md, "Against Prometheus and
// VictoriaMetrics"). One data set (the storage benchmark's agent, 25 series
// a second, with 24 one-sample spikes planted; bench/peer_data.h) loaded
// into each system the way it takes history: ours through gRPC ingest
// (metricsd on a throwaway database: run it under pg_virtualenv,
// bench/peers.sh), Prometheus through `promtool tsdb create-blocks-from
// openmetrics` and then started on those blocks, VictoriaMetrics through
// its /api/v1/import. For each: bytes a sample on disk after one day and
// after all days (each after its own compaction), ingest CPU a sample,
// then chart queries of 1000 points over the last hour, day and week (p50
// of --repeats, warm), and how many of the planted spikes each answer
// keeps. The last line is one JSON object with every figure and the ratios
// (ours over the peer's).
#include <grpcpp/create_channel.h>
#include <signal.h>
#include <stdlib.h>

#include <time.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <thread>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "bench/cpu_time.h"
#include "bench/peer_data.h"
#include "bench/peer_http.h"
#include "common/subprocess.h"
#include "proto/metrics/v1/query.grpc.pb.h"
#include "proto/metrics/v1/trials.grpc.pb.h"
#include "storage/pg/jobs/sealer.h"
#include "storage/pg/testing/pg_checks.h"
#include "storage/pg/testing/storage_sizes.h"
#include "tests/testing/metricsd_process.h"
#include "tests/testing/resending_streamer.h"
#include "tests/testing/test_database.h"

ABSL_FLAG(int, days, 7,
          "Days of data (at least 1); bytes are measured after the first day "
          "too.");
ABSL_FLAG(std::vector<std::string>, systems,
          std::vector<std::string>({"ours", "prometheus", "victoriametrics"}),
          "The systems to run (the ratios need ours and the peer).");
ABSL_FLAG(int, repeats, 20, "Timed runs of each chart query, after a warm-up.");
ABSL_FLAG(std::string, work_dir, "",
          "Where the peers keep their data; default a new directory under "
          "$TMPDIR (or /tmp), removed at the end.");

namespace metrics::bench {
namespace {

namespace fs = std::filesystem;
using common::Subprocess;

constexpr int64_t kDay = 86400;
constexpr int kPoints = 1000;
constexpr const char* kWindowNames[] = {"1h", "1d", "7d"};
constexpr int kWindows = 3;

// What one system measured.
struct Figures {
  std::string key;   // in the JSON: "ours", "prometheus", "victoriametrics"
  std::string name;
  double bytes_per_sample_1d = 0, bytes_per_sample = 0;
  double ingest_cpu_us_per_sample = 0, ingest_cpu_us_per_sample_1d = 0;
  double load_s = 0;
  double p50_ms[kWindows] = {};
  // Spikes the answer shows (its extreme within 1e-9 of the planted value),
  // and of them those it gives to the bit.
  int spikes_kept[kWindows] = {};
  int spikes_exact[kWindows] = {};
  int spikes_kept_plain = -1;  // peers: a plain selector over the week
};

// How many spikes an answer shows, and how many of those exactly.
struct Kept {
  int shown = 0, exact = 0;
  void Count(double value, const Spike& spike) {
    if (value == spike.value) {
      ++shown;
      ++exact;
    } else if (std::abs(value - spike.value) <= 1e-9 * std::abs(spike.value)) {
      ++shown;
    }
  }
};

#define BENCH_CHECK_OK(expr)                                         \
  do {                                                               \
    if (absl::Status status_ = (expr); !status_.ok()) {              \
      std::fprintf(stderr, "bench: %s\n", status_.ToString().c_str()); \
      std::exit(1);                                                  \
    }                                                                \
  } while (false)

template <typename T>
T ValueOrExit(absl::StatusOr<T> value) {
  BENCH_CHECK_OK(value.status());
  return *std::move(value);
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

int64_t DirectoryBytes(const fs::path& dir) {
  int64_t bytes = 0;
  for (const auto& entry : fs::recursive_directory_iterator(dir)) {
    if (entry.is_regular_file()) bytes += static_cast<int64_t>(entry.file_size());
  }
  return bytes;
}

// The windows, each ending at `end_s` (a second past the last sample).
struct Windows {
  int64_t end_s = 0;
  int64_t seconds[kWindows] = {};
};

// p50 of `repeats` timed calls of `query` (after one untimed), and the
// spikes the last answer keeps, into window `w` of `f`.
template <typename Query>
void TimeWindow(int repeats, Query query, int w, Figures& f) {
  std::vector<double> ms;
  Kept kept;
  for (int i = 0; i <= repeats; ++i) {
    const absl::Time start = absl::Now();
    kept = query();
    if (i > 0) ms.push_back(absl::ToDoubleMilliseconds(absl::Now() - start));
  }
  f.p50_ms[w] = Median(ms);
  f.spikes_kept[w] = kept.shown;
  f.spikes_exact[w] = kept.exact;
}

// ---- ours ----

Kept SpikesInOurAnswer(const v1::QuerySeriesResponse& response,
                       const PeerData& data) {
  Kept kept;
  for (const Spike& spike : data.spikes()) {
    const auto& labels = data.series()[spike.series];
    const int64_t t = data.time_us(spike.report);
    for (const v1::SeriesBuckets& s : response.series()) {
      if (s.series().name() != labels.name ||
          s.series().gpu_uuid() != labels.gpu_uuid) {
        continue;
      }
      for (int i = 0; i < s.bucket_start_us_size(); ++i) {
        const int64_t begin = s.bucket_start_us(i);
        const bool holds = s.resolution_us() == 0
                               ? begin == t
                               : begin <= t && t < begin + s.resolution_us();
        if (holds) kept.Count(spike.dip ? s.min(i) : s.max(i), spike);
      }
    }
  }
  return kept;
}

// The CPU time of the calling thread, in seconds.
double ThreadCpuSeconds() {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + t.tv_nsec / 1e9;
}

Figures RunOurs(const PeerData& data, const Windows& windows) {
  Figures f{"ours", "ours (metricsd + PostgreSQL)"};
  auto db = ValueOrExit(test_util::TestDatabase::Create());
  const std::string data_directory = ValueOrExit(storage::pg::test_util::QueryScalar(
      db->url(), "SELECT current_setting('data_directory')"));
  const pid_t postmaster = PostmasterPid(data_directory);
  auto metricsd = ValueOrExit(test_util::StartMetricsd(
      {METRICSD_PATH, "--database-url=" + db->url(), "--grpc-address=127.0.0.1:0",
       "--http-address=127.0.0.1:0", "--auth=off",
       // History arrives a week a minute: the sealer keeps up as it does with
       // agents at their pace, so raw rows stay as few as the open windows
       // and the space they free is reused, not left behind as at a bulk load.
       "--seal-every=1s"}));
  auto channel = grpc::CreateChannel(metricsd.grpc_target,
                                     grpc::InsecureChannelCredentials());
  {
    auto trials = v1::TrialService::NewStub(channel);
    grpc::ClientContext context;
    v1::CreateTrialRequest request;
    request.set_id(1);
    v1::Trial trial;
    if (!trials->CreateTrial(&context, request, &trial).ok()) std::exit(1);
  }
  double cpu_s = 0, load_s = 0;
  // Reports [first, last) on two streams, each a half of the span.
  auto load = [&](int64_t first, int64_t last, int phase) {
    constexpr int kStreams = 2;
    std::vector<std::vector<v1::SystemMetricsBatch>> streams;
    const int64_t half = (last - first + 1) / 2;
    streams.push_back(data.Batches(1, first, first + half, 600));
    streams.push_back(data.Batches(1, first + half, last, 600));
    const CpuUse before = CpuUse::Now(postmaster, {metricsd.process->pid()});
    const absl::Time t0 = absl::Now();
    std::vector<std::thread> threads;
    std::vector<absl::Status> results(kStreams);
    for (int s = 0; s < kStreams; ++s) {
      threads.emplace_back([&, s] {
        test_util::StreamerOptions options;
        options.stream_id = absl::StrCat("peers-bench/", phase, "/", s);
        options.trial_id = 1;
        options.window = 4;
        options.timeout = absl::Minutes(30);
        test_util::ResendingStreamer streamer(
            [&] { return metricsd.grpc_target; }, options);
        results[s] = streamer.SendAll(std::move(streams[s]));
      });
    }
    for (std::thread& t : threads) t.join();
    for (const absl::Status& r : results) BENCH_CHECK_OK(r);
    // Every window is closed (the data is history): seal what metricsd's
    // sealer has not yet, here, on this thread, its CPU counted as
    // metricsd's (where the sealer runs), as Prometheus's compaction is.
    storage::pg::SealOptions seal;
    seal.database_url = db->url();
    const double seal_cpu_before = ThreadCpuSeconds();
    BENCH_CHECK_OK(storage::pg::SealClosedWindows(seal).status());
    const double seal_cpu_s = ThreadCpuSeconds() - seal_cpu_before;
    // Agents at their pace hold only their open windows raw; a load of
    // history held all of it at once, and PostgreSQL keeps the emptied
    // pages for reuse. Compacted to the size they have then, as the peers
    // are measured after their compaction (not counted as ingest CPU).
    load_s += absl::ToDoubleSeconds(absl::Now() - t0);
    const CpuUse used = CpuUse::Now(postmaster, {metricsd.process->pid()}) - before;
    cpu_s += used.postgres + used.metricsd + seal_cpu_s;
    BENCH_CHECK_OK(storage::pg::test_util::QueryScalar(db->url(), "VACUUM FULL metrics_profiling")
                       .status());
  };
  auto bytes_per_sample = [&](int64_t reports) {
    const auto sizes = ValueOrExit(storage::pg::test_util::MeasureStorage(
        db->url(), storage::pg::test_util::Baseline::kSkip));
    const int64_t total = sizes.raw_heap + sizes.raw_toast + sizes.raw_indexes +
                          sizes.rollups + sizes.registry;
    const double values = static_cast<double>(reports * data.series().size());
    std::printf("ours, %lld reports: bytes a sample: raw heap %.2f, TOAST %.2f, indexes %.2f; "
                "rollups %.2f; registry %.2f (%lld sealed windows)\n",
                static_cast<long long>(reports), sizes.raw_heap / values,
                sizes.raw_toast / values, sizes.raw_indexes / values, sizes.rollups / values,
                sizes.registry / values, static_cast<long long>(sizes.sealed_rows));
    return static_cast<double>(total) / (reports * data.series().size());
  };
  const int64_t first_day = std::min(data.reports(), kDay);
  load(0, first_day, 1);
  f.ingest_cpu_us_per_sample_1d = cpu_s * 1e6 / (first_day * data.series().size());
  f.bytes_per_sample_1d = bytes_per_sample(first_day);
  if (data.reports() > first_day) load(first_day, data.reports(), 2);
  f.bytes_per_sample = bytes_per_sample(data.reports());
  f.load_s = load_s;
  f.ingest_cpu_us_per_sample = cpu_s * 1e6 / (data.reports() * data.series().size());

  auto stub = v1::QueryService::NewStub(channel);
  for (int w = 0; w < kWindows; ++w) {
    TimeWindow(absl::GetFlag(FLAGS_repeats), [&] {
      v1::QuerySeriesRequest request;
      request.set_trial_id(1);
      request.mutable_start()->set_seconds(windows.end_s - windows.seconds[w]);
      request.mutable_end()->set_seconds(windows.end_s);
      request.set_max_points(kPoints);
      request.set_view(v1::QuerySeriesRequest::CHART);
      grpc::ClientContext context;
      context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(60)));
      v1::QuerySeriesResponse response;
      if (grpc::Status s = stub->QuerySeries(&context, request, &response); !s.ok()) {
        std::fprintf(stderr, "bench: QuerySeries: %s\n", s.error_message().c_str());
        std::exit(1);
      }
      return SpikesInOurAnswer(response, data);
    }, w, f);
  }
  metricsd.process->Signal(SIGTERM);
  (void)metricsd.process->Wait(absl::Seconds(60));  // the figures are taken
  return f;
}

// ---- the peers ----

// A spike is kept when the point whose step holds it, (t - step, t], shows
// it in the series of its statistic (or, for a plain selector, when any
// point shows it).
Kept SpikesInPeerAnswer(const std::vector<RangeSeries>& answer,
                        const PeerData& data, int64_t step_ms, bool plain) {
  Kept kept;
  for (const Spike& spike : data.spikes()) {
    const auto& labels = data.series()[spike.series];
    const int64_t t = data.time_ms(spike.report);
    for (const RangeSeries& s : answer) {
      auto label = [&](const char* name) {
        auto it = s.labels.find(name);
        return it == s.labels.end() ? std::string() : it->second;
      };
      if (label("name") != labels.name || label("gpu") != labels.gpu_uuid ||
          (!plain && label("stat") != (spike.dip ? "min" : "max"))) {
        continue;
      }
      for (size_t i = 0; i < s.values.size(); ++i) {
        const bool holds = plain || (s.time_ms[i] - step_ms < t && t <= s.time_ms[i]);
        const Kept before = kept;
        if (holds) kept.Count(s.values[i], spike);
        if (kept.shown > before.shown) break;
      }
    }
  }
  return kept;
}

// Min, max and mean of every series of the agent per step, in one request:
// the nearest PromQL/MetricsQL to our chart query.
std::string ChartQuery(int64_t step_ms) {
  std::string query;
  for (const char* stat : {"min", "max", "avg"}) {
    if (!query.empty()) query += " or ";
    absl::StrAppend(&query, "label_replace(", stat, "_over_time(",
                    PeerData::kPeerMetric, "{agent=\"", PeerData::kAgent, "\"}[",
                    step_ms, "ms]),\"stat\",\"", stat == std::string("avg") ? "mean" : stat,
                    "\",\"\",\"\")");
  }
  return query;
}

std::string RangeTarget(const std::string& query, int64_t end_s, int64_t window_s,
                        absl::string_view extra = "") {
  const int64_t step_ms = window_s * 1000 / kPoints;
  return absl::StrFormat("/api/v1/query_range?query=%s&start=%.3f&end=%d&step=%.3f%s",
                         UrlEncode(query), end_s - (window_s * 1000 - step_ms) / 1000.0,
                         end_s, step_ms / 1000.0, extra);
}

void QueryPeer(int port, const PeerData& data, const Windows& windows,
               absl::string_view extra, Figures& f) {
  for (int w = 0; w < kWindows; ++w) {
    const int64_t step_ms = windows.seconds[w] * 1000 / kPoints;
    const std::string target =
        RangeTarget(ChartQuery(step_ms), windows.end_s, windows.seconds[w], extra);
    TimeWindow(absl::GetFlag(FLAGS_repeats), [&] {
      const std::string body = ValueOrExit(PeerRequest(port, "GET", target));
      return SpikesInPeerAnswer(ValueOrExit(ParseQueryRange(body)), data, step_ms,
                                false);
    }, w, f);
  }
  // What a dashboard panel of the plain metric shows over the week.
  const std::string plain = RangeTarget(
      absl::StrCat(PeerData::kPeerMetric, "{agent=\"", PeerData::kAgent, "\"}"),
      windows.end_s, windows.seconds[kWindows - 1], extra);
  f.spikes_kept_plain = SpikesInPeerAnswer(
      ValueOrExit(ParseQueryRange(ValueOrExit(PeerRequest(port, "GET", plain)))),
      data, 0, true).shown;
}

// Waits until GET `path` answers 2xx.
absl::Status AwaitReady(int port, const std::string& path, Subprocess& process) {
  const absl::Time deadline = absl::Now() + absl::Minutes(5);
  while (absl::Now() < deadline) {
    if (PeerRequest(port, "GET", path, "", absl::Seconds(5)).ok()) {
      return absl::OkStatus();
    }
    if (absl::StatusOr<int> code = process.Wait(absl::Milliseconds(200)); code.ok()) {
      return absl::UnavailableError(absl::StrCat(
          "the peer exited (", *code, "): ", process.stderr_text().substr(0, 2000)));
    }
  }
  return absl::DeadlineExceededError(absl::StrCat("no answer on ", path));
}

// The value of an unlabelled metric in a /metrics page; -1 when absent.
double MetricValue(const std::string& page, absl::string_view name) {
  double total = -1;
  for (absl::string_view line : absl::StrSplit(page, '\n')) {
    if (!absl::ConsumePrefix(&line, name)) continue;
    if (line.empty() || (line[0] != ' ' && line[0] != '{')) continue;
    double v = 0;
    if (absl::SimpleAtod(line.substr(line.rfind(' ') + 1), &v)) {
      total = std::max(total, 0.0) + v;  // labelled lines add up
    }
  }
  return total;
}

// Prometheus compacts its blocks a minute after it starts, then every
// minute: waits for the first round, then until the block count holds.
absl::Status AwaitPrometheusCompaction(int port) {
  const absl::Time deadline = absl::Now() + absl::Minutes(10);
  double blocks = -1;
  int steady = 0;
  while (absl::Now() < deadline && steady < 5) {
    absl::SleepFor(absl::Seconds(1));
    const auto page = PeerRequest(port, "GET", "/metrics");
    if (!page.ok()) return page.status();
    if (MetricValue(*page, "prometheus_tsdb_compactions_triggered_total") < 1) continue;
    const double now = MetricValue(*page, "prometheus_tsdb_blocks_loaded");
    steady = now == blocks ? steady + 1 : 0;
    blocks = now;
  }
  return steady >= 5 ? absl::OkStatus()
                     : absl::DeadlineExceededError("Prometheus did not compact");
}

std::unique_ptr<Subprocess> StartPrometheus(const fs::path& work, const fs::path& tsdb,
                                            int port) {
  const fs::path config = work / "prometheus.yml";
  if (FILE* file = std::fopen(config.c_str(), "w")) {
    std::fputs("global: {}\n", file);  // no scrapes: the blocks are the data
    std::fclose(file);
  }
  return ValueOrExit(Subprocess::Start(
      {"prometheus", "--config.file=" + config.string(),
       "--storage.tsdb.path=" + tsdb.string(),
       // Blocks this old stay, and compact up to the largest range (31 days).
       "--storage.tsdb.retention.time=100y",
       absl::StrCat("--web.listen-address=127.0.0.1:", port), "--log.level=error"}));
}

absl::Status RunPromtool(const fs::path& openmetrics, const fs::path& out,
                         double& cpu_s) {
  const double before = ChildrenCpuSeconds();
  auto promtool = Subprocess::Start({"promtool", "tsdb", "create-blocks-from",
                                     "--quiet", "openmetrics", openmetrics.string(),
                                     out.string()});
  if (!promtool.ok()) return promtool.status();
  absl::StatusOr<int> code = (*promtool)->Wait(absl::Minutes(60));
  if (!code.ok()) return code.status();
  if (*code != 0) {
    return absl::InternalError(absl::StrCat("promtool exited ", *code, ": ",
                                            (*promtool)->stderr_text().substr(0, 2000)));
  }
  cpu_s = ChildrenCpuSeconds() - before;
  fs::remove(openmetrics);
  return absl::OkStatus();
}

Figures RunPrometheus(const PeerData& data, const Windows& windows,
                      const fs::path& work) {
  Figures f{"prometheus", "Prometheus 2.42 (promtool blocks)"};
  const int64_t first_day = std::min(data.reports(), kDay);
  std::printf("Prometheus: writing OpenMetrics, running promtool ...\n");
  std::fflush(stdout);
  double cpu_1d = 0, cpu = 0;
  BENCH_CHECK_OK(data.WriteOpenMetrics(0, first_day, work / "1d.om"));
  BENCH_CHECK_OK(RunPromtool(work / "1d.om", work / "prometheus-1d", cpu_1d));
  f.ingest_cpu_us_per_sample_1d = cpu_1d * 1e6 / (first_day * data.series().size());
  // The one-day database compacts while promtool builds the whole one.
  const int port_1d = ValueOrExit(FreePort());
  auto prometheus_1d = StartPrometheus(work, work / "prometheus-1d", port_1d);
  BENCH_CHECK_OK(AwaitReady(port_1d, "/-/ready", *prometheus_1d));
  BENCH_CHECK_OK(data.WriteOpenMetrics(0, data.reports(), work / "all.om"));
  const absl::Time t0 = absl::Now();
  BENCH_CHECK_OK(RunPromtool(work / "all.om", work / "prometheus", cpu));
  f.load_s = absl::ToDoubleSeconds(absl::Now() - t0);
  f.ingest_cpu_us_per_sample = cpu * 1e6 / (data.reports() * data.series().size());
  BENCH_CHECK_OK(AwaitPrometheusCompaction(port_1d));
  f.bytes_per_sample_1d = static_cast<double>(DirectoryBytes(work / "prometheus-1d")) /
                          (first_day * data.series().size());
  prometheus_1d->Signal(SIGTERM);
  (void)prometheus_1d->Wait(absl::Seconds(60));  // measured already

  const int port = ValueOrExit(FreePort());
  auto prometheus = StartPrometheus(work, work / "prometheus", port);
  BENCH_CHECK_OK(AwaitReady(port, "/-/ready", *prometheus));
  std::printf("Prometheus: waiting for its compaction ...\n");
  std::fflush(stdout);
  BENCH_CHECK_OK(AwaitPrometheusCompaction(port));
  f.bytes_per_sample = static_cast<double>(DirectoryBytes(work / "prometheus")) /
                       (data.reports() * data.series().size());
  QueryPeer(port, data, windows, "", f);
  prometheus->Signal(SIGTERM);
  (void)prometheus->Wait(absl::Seconds(60));
  return f;
}

// Imports reports [first, last) an hour a request, then flushes and merges
// every month's partition; adds the server's CPU to `cpu_s`.
void ImportToVictoriaMetrics(int port, pid_t pid, const PeerData& data, int64_t first,
                             int64_t last, double& cpu_s) {
  const double before = ProcessCpuSeconds(pid);
  for (int64_t r = first; r < last; r += 3600) {
    BENCH_CHECK_OK(PeerRequest(port, "POST", "/api/v1/import",
                               data.VictoriaMetricsLines(r, std::min(last, r + 3600)))
                       .status());
  }
  BENCH_CHECK_OK(PeerRequest(port, "GET", "/internal/force_flush").status());
  cpu_s += ProcessCpuSeconds(pid) - before;
  std::vector<std::string> months;
  for (int64_t r = first; r < last; r += 3600) {
    months.push_back(absl::FormatTime("%Y_%m", absl::FromUnixMicros(data.time_us(r)),
                                      absl::UTCTimeZone()));
  }
  months.push_back(absl::FormatTime("%Y_%m",
                                    absl::FromUnixMicros(data.time_us(last - 1)),
                                    absl::UTCTimeZone()));
  std::sort(months.begin(), months.end());
  months.erase(std::unique(months.begin(), months.end()), months.end());
  for (const std::string& month : months) {
    BENCH_CHECK_OK(PeerRequest(port, "GET",
                               "/internal/force_merge?partition_prefix=" + month)
                       .status());
  }
  // The merges run in the background: wait until none is active.
  for (int steady = 0; steady < 3;) {
    absl::SleepFor(absl::Seconds(1));
    const std::string page = ValueOrExit(PeerRequest(port, "GET", "/metrics"));
    const bool merging = MetricValue(page, "vm_active_merges") > 0 ||
                         MetricValue(page, "vm_active_force_merges") > 0;
    steady = merging ? 0 : steady + 1;
  }
}

Figures RunVictoriaMetrics(const PeerData& data, const Windows& windows,
                           const fs::path& work) {
  Figures f{"victoriametrics", "VictoriaMetrics 1.79 (/api/v1/import)"};
  const int port = ValueOrExit(FreePort());
  const fs::path dir = work / "victoria-metrics";
  auto vm = ValueOrExit(Subprocess::Start(
      {"victoria-metrics", "-storageDataPath=" + dir.string(),
       "-retentionPeriod=100y", absl::StrCat("-httpListenAddr=127.0.0.1:", port),
       // Every timed query computes its answer (the response cache would
       // answer a repeat from memory).
       "-search.disableCache", "-loggerLevel=ERROR"}));
  BENCH_CHECK_OK(AwaitReady(port, "/health", *vm));
  std::printf("VictoriaMetrics: importing ...\n");
  std::fflush(stdout);
  const int64_t first_day = std::min(data.reports(), kDay);
  double cpu = 0;
  const absl::Time t0 = absl::Now();
  ImportToVictoriaMetrics(port, vm->pid(), data, 0, first_day, cpu);
  f.ingest_cpu_us_per_sample_1d = cpu * 1e6 / (first_day * data.series().size());
  f.bytes_per_sample_1d = static_cast<double>(DirectoryBytes(dir)) /
                          (first_day * data.series().size());
  if (data.reports() > first_day) {
    ImportToVictoriaMetrics(port, vm->pid(), data, first_day, data.reports(), cpu);
  }
  f.load_s = absl::ToDoubleSeconds(absl::Now() - t0);
  f.bytes_per_sample = static_cast<double>(DirectoryBytes(dir)) /
                       (data.reports() * data.series().size());
  f.ingest_cpu_us_per_sample = cpu * 1e6 / (data.reports() * data.series().size());
  QueryPeer(port, data, windows, "&nocache=1", f);
  vm->Signal(SIGTERM);
  (void)vm->Wait(absl::Seconds(60));
  return f;
}

int Run() {
  const int days = std::max(1, absl::GetFlag(FLAGS_days));
  const int64_t reports = days * kDay;
  // The data ends an hour before now: recent enough for every retention,
  // old enough that no peer holds it back as still arriving.
  const int64_t start_s = (absl::ToUnixSeconds(absl::Now()) - reports - 3600) / 3600 * 3600;
  std::printf("generating %d day(s) of one 8-GPU agent: %lld reports of 25 values ...\n",
              days, static_cast<long long>(reports));
  std::fflush(stdout);
  const PeerData data = PeerData::Generate(start_s, reports);
  Windows windows;
  windows.end_s = data.time_us(reports - 1) / 1000000 + 1;
  windows.seconds[0] = 3600;
  windows.seconds[1] = kDay;
  windows.seconds[2] = std::min<int64_t>(reports, 7 * kDay);

  fs::path work = absl::GetFlag(FLAGS_work_dir);
  const bool own_work = work.empty();
  if (own_work) {
    const char* tmp = std::getenv("TMPDIR");
    std::string pattern = absl::StrCat(tmp ? tmp : "/tmp", "/peers-bench-XXXXXX");
    if (::mkdtemp(pattern.data()) == nullptr) {
      std::fprintf(stderr, "bench: cannot make a directory under %s\n", tmp ? tmp : "/tmp");
      return 1;
    }
    work = pattern;
  }
  fs::create_directories(work);

  std::vector<Figures> all;
  for (const std::string& system : absl::GetFlag(FLAGS_systems)) {
    if (system == "ours") {
      std::printf("ours: loading through gRPC ingest ...\n");
      std::fflush(stdout);
      all.push_back(RunOurs(data, windows));
    } else if (system == "prometheus") {
      all.push_back(RunPrometheus(data, windows, work));
    } else if (system == "victoriametrics") {
      all.push_back(RunVictoriaMetrics(data, windows, work));
    } else {
      std::fprintf(stderr, "bench: --systems: unknown system \"%s\"\n", system.c_str());
      return 1;
    }
  }
  if (own_work) fs::remove_all(work);

  const double samples = static_cast<double>(reports) * data.series().size();
  const int spikes = static_cast<int>(data.spikes().size());
  std::printf("\n%.0f samples (%d days of 25 series at 1 s), %d spikes planted\n\n",
              samples, days, spikes);
  std::printf("  %-38s %9s %9s %10s %10s %9s %9s %9s %9s %9s %9s\n", "system",
              "B/sample", "B/s. 1d", "ingest", "ingest 1d", "1h p50", "1d p50", "7d p50",
              "spikes", "to the", "plain");
  std::printf("  %-38s %9s %9s %10s %10s %9s %9s %9s %9s %9s %9s\n", "", "", "",
              "CPU us/s.", "CPU us/s.", "ms", "ms", "ms", "1h/1d/7d", "bit, 7d", "7d");
  for (const Figures& f : all) {
    std::printf("  %-38s %9.2f %9.2f %10.2f %10.2f %9.1f %9.1f %9.1f %3d/%2d/%2d %9d %9s\n",
                f.name.c_str(), f.bytes_per_sample, f.bytes_per_sample_1d,
                f.ingest_cpu_us_per_sample, f.ingest_cpu_us_per_sample_1d, f.p50_ms[0],
                f.p50_ms[1], f.p50_ms[2],
                f.spikes_kept[0], f.spikes_kept[1], f.spikes_kept[2], f.spikes_exact[2],
                f.spikes_kept_plain < 0 ? "-"
                                        : absl::StrCat(f.spikes_kept_plain, "/", spikes)
                                              .c_str());
  }
  std::printf("\n  load wall time (promtool's, writing blocks offline, is not comparable):");
  for (const Figures& f : all) std::printf(" %s %.0f s", f.key.c_str(), f.load_s);
  std::printf("\n");

  std::string json = absl::StrFormat("{\"samples\":%.0f,\"spikes\":%d", samples, spikes);
  for (const Figures& f : all) {
    const char* key = f.key.c_str();
    absl::StrAppendFormat(
        &json,
        ",\"%s_bytes_per_sample\":%.3f,\"%s_bytes_per_sample_1d\":%.3f,"
        "\"%s_ingest_cpu_us_per_sample\":%.3f,\"%s_ingest_cpu_us_per_sample_1d\":%.3f",
        key, f.bytes_per_sample, key, f.bytes_per_sample_1d, key,
        f.ingest_cpu_us_per_sample, key, f.ingest_cpu_us_per_sample_1d);
    absl::StrAppendFormat(&json, ",\"%s_spikes_exact_7d\":%d", key, f.spikes_exact[2]);
    for (int w = 0; w < kWindows; ++w) {
      absl::StrAppendFormat(&json, ",\"%s_query_p50_ms_%s\":%.2f,\"%s_spikes_%s\":%d",
                            key, kWindowNames[w], f.p50_ms[w], key,
                            kWindowNames[w], f.spikes_kept[w]);
    }
    if (f.spikes_kept_plain >= 0) {
      absl::StrAppendFormat(&json, ",\"%s_spikes_plain_7d\":%d", key,
                            f.spikes_kept_plain);
    }
  }
  const Figures* ours = nullptr;
  for (const Figures& f : all) {
    if (f.key == "ours") ours = &f;
  }
  for (const Figures& peer : all) {
    if (ours == nullptr || &peer == ours) continue;
    const char* key = peer.key.c_str();
    absl::StrAppendFormat(
        &json,
        ",\"bytes_ratio_vs_%s\":%.2f,\"query_ratio_1h_vs_%s\":%.2f,"
        "\"query_ratio_1d_vs_%s\":%.2f,\"query_ratio_7d_vs_%s\":%.2f,"
        "\"ingest_cpu_ratio_vs_%s\":%.2f",
        key, ours->bytes_per_sample / peer.bytes_per_sample, key,
        ours->p50_ms[0] / peer.p50_ms[0], key, ours->p50_ms[1] / peer.p50_ms[1], key,
        ours->p50_ms[2] / peer.p50_ms[2], key,
        ours->ingest_cpu_us_per_sample / peer.ingest_cpu_us_per_sample);
  }
  json += "}";
  std::printf("%s\n", json.c_str());
  return 0;
}

}  // namespace
}  // namespace metrics::bench

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  return metrics::bench::Run();
}
