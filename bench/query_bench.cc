// The query benchmark (docs/benchmarks.md). Starts metricsd on a
// throwaway database (run it under pg_virtualenv: bench/query.sh), loads
// through the gRPC
// ingest API one series of 100 thousand, 1 million and 10 million samples
// (1 Hz) and a realistic trial (25 series of one agent over 7 days at
// 1 Hz), then asks QuerySeries for the whole range at 1000 points,
// repeatedly, and in the same run times the naive SQL (a date_bin GROUP BY
// over the raw rows) for the same buckets. Then the density case: two
// agents with the same day of history, one going on once a second for the
// last 9 minutes and one reporting 1000 times a second over them (rows still
// in their open window), their whole-run charts timed side by side. Prints a
// table, then one JSON object as the last line.
#include <grpcpp/create_channel.h>
#include <signal.h>

#include <algorithm>
#include <cstdio>
#include <functional>
#include <string>
#include <thread>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "proto/metrics/v1/ingest.grpc.pb.h"
#include "proto/metrics/v1/query.grpc.pb.h"
#include "proto/metrics/v1/trials.grpc.pb.h"
#include "storage/pg/jobs/sealer.h"
#include "storage/pg/testing/pg_checks.h"
#include "tests/testing/realistic_batch.h"
#include "tests/testing/resending_streamer.h"
#include "tests/testing/metricsd_process.h"
#include "tests/testing/test_database.h"

ABSL_FLAG(int64_t, largest, 10000000,
          "Samples of the largest single series (the others are 1/10 and "
          "1/100 of it).");
ABSL_FLAG(int, page_days, 7, "Days of the realistic 25-series trial.");
ABSL_FLAG(int, repeats, 20, "Timed repeats of each gRPC query.");
ABSL_FLAG(int, dense_per_second, 1000,
          "Reports a second of the density case's dense agent over its last "
          "9 minutes (0 skips the case).");
ABSL_FLAG(int, naive_repeats, 3,
          "Timed repeats of each naive SQL query; 0 skips them.");

namespace metrics::bench {
namespace {

using test_util::ResendingStreamer;
using test_util::StreamerOptions;

constexpr int64_t kSecond = 1000000;
constexpr int kReportsPerBatch = 10000;

double Percentile(std::vector<double> v, double p) {
  std::sort(v.begin(), v.end());
  if (v.empty()) return 0;  // nothing timed (--naive_repeats=0)
  return v[std::min(v.size() - 1, static_cast<size_t>(p * v.size()))];
}

// Sends `reports` 1 Hz reports from `start` for one agent, on `streams`
// streams each covering a slice of time (so the writer's lanes share the
// load). `fill` adds the series and one report's values.
absl::Status Load(const std::string& target, int32_t trial,
                  const std::string& agent, absl::Time start, int64_t reports,
                  int streams,
                  const std::function<void(v1::SystemMetricsBatch&, absl::Time,
                                           int64_t, bool)>& fill) {
  std::vector<std::thread> threads;
  std::vector<absl::Status> results(streams);
  const int64_t per_stream = (reports + streams - 1) / streams;
  for (int s = 0; s < streams; ++s) {
    threads.emplace_back([&, s] {
      std::vector<v1::SystemMetricsBatch> batches;
      const int64_t first = s * per_stream;
      const int64_t last = std::min(reports, first + per_stream);
      for (int64_t r = first; r < last; r += kReportsPerBatch) {
        v1::SystemMetricsBatch batch;
        batch.set_trial_id(trial);
        batch.set_agent_id(agent);
        for (int64_t i = r; i < std::min(last, r + kReportsPerBatch); ++i) {
          fill(batch, start + absl::Seconds(i), i, i == r);
        }
        batches.push_back(std::move(batch));
      }
      StreamerOptions options;
      options.stream_id = absl::StrCat(agent, "/", s);
      options.trial_id = trial;
      options.window = 4;
      options.timeout = absl::Minutes(30);
      ResendingStreamer streamer([&] { return target; }, options);
      results[s] = streamer.SendAll(std::move(batches));
    });
  }
  for (auto& t : threads) t.join();
  for (const absl::Status& r : results) {
    if (!r.ok()) return r;
  }
  return absl::OkStatus();
}

// One agent-wide series with a spike now and then.
void FillOne(v1::SystemMetricsBatch& batch, absl::Time t, int64_t i,
             bool declare) {
  if (declare) {
    v1::SeriesDeclaration* s = batch.add_series();
    s->set_name("gpu_util");
    s->set_unit("percent");
  }
  v1::SystemMetricsReport* report = batch.add_reports();
  report->mutable_time()->set_seconds(absl::ToUnixSeconds(t));
  report->add_series(0);
  report->add_values(i % 999983 == 0 ? 1000 : (i * 7919) % 100);
}

struct Timing {
  double p50 = 0, p95 = 0;
  int buckets = 0;
  int64_t resolution_us = 0;
};

Timing TimeQueries(v1::QueryService::Stub& stub, int32_t trial,
                   const std::string& name) {
  std::vector<double> ms;
  Timing timing;
  for (int i = 0; i < absl::GetFlag(FLAGS_repeats) + 1; ++i) {
    v1::QuerySeriesRequest request;
    request.set_trial_id(trial);
    if (!name.empty()) request.add_name(name);
    request.set_max_points(1000);
    grpc::ClientContext context;
    context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(60)));
    v1::QuerySeriesResponse response;
    const absl::Time start = absl::Now();
    grpc::Status status = stub.QuerySeries(&context, request, &response);
    const double elapsed = absl::ToDoubleMilliseconds(absl::Now() - start);
    if (!status.ok()) {
      std::fprintf(stderr, "bench: query failed: %s\n",
                   status.error_message().c_str());
      return timing;
    }
    if (i == 0) continue;  // warm-up
    ms.push_back(elapsed);
    timing.buckets = 0;
    for (const auto& s : response.series()) {
      timing.buckets += s.count_size();
      timing.resolution_us = s.resolution_us();
    }
  }
  timing.p50 = Percentile(ms, 0.5);
  timing.p95 = Percentile(ms, 0.95);
  return timing;
}

// A realistic report (25 series) at `start` + i * `every`.
std::function<void(v1::SystemMetricsBatch&, absl::Time, int64_t, bool)> RealisticEvery(
    absl::Time start, absl::Duration every) {
  return [start, every](v1::SystemMetricsBatch& batch, absl::Time, int64_t i, bool declare) {
    if (declare) test_util::DeclareRealisticSeries(batch);
    test_util::AddRealisticReport(batch, start + i * every, i);
  };
}

int Run() {
  auto db = test_util::TestDatabase::Create();
  if (!db.ok()) {
    std::fprintf(stderr, "bench: %s\n", db.status().ToString().c_str());
    return 1;
  }
  auto metricsd = test_util::StartMetricsd(
      {METRICSD_PATH, "--database-url=" + (*db)->url(),
       "--grpc-address=127.0.0.1:0", "--http-address=127.0.0.1:0",
       "--max-future=87600h", "--auth=off"});
  if (!metricsd.ok()) {
    std::fprintf(stderr, "bench: %s\n", metricsd.status().ToString().c_str());
    return 1;
  }
  const std::string target = metricsd->grpc_target;
  auto channel = grpc::CreateChannel(target, grpc::InsecureChannelCredentials());
  auto trials = v1::TrialService::NewStub(channel);
  auto query = v1::QueryService::NewStub(channel);

  const int64_t largest = absl::GetFlag(FLAGS_largest);
  const std::vector<std::pair<int32_t, int64_t>> sizes = {
      {1, largest / 100}, {2, largest / 10}, {3, largest}};
  const int page_days = absl::GetFlag(FLAGS_page_days);
  const absl::Time start = absl::FromUnixSeconds(1700000000);
  for (int32_t id : {1, 2, 3, 4, 5, 6}) {
    grpc::ClientContext context;
    v1::CreateTrialRequest request;
    request.set_id(id);
    v1::Trial trial;
    if (!trials->CreateTrial(&context, request, &trial).ok()) return 1;
  }
  std::printf("loading through gRPC ingest ...\n");
  std::fflush(stdout);
  for (const auto& [trial, samples] : sizes) {
    const absl::Time t0 = absl::Now();
    if (absl::Status s = Load(target, trial, "agent-0", start, samples, 2, FillOne);
        !s.ok()) {
      std::fprintf(stderr, "bench: load: %s\n", s.ToString().c_str());
      return 1;
    }
    std::printf("  1 series, %lld samples: %.1f s\n",
                static_cast<long long>(samples),
                absl::ToDoubleSeconds(absl::Now() - t0));
    std::fflush(stdout);
    if (absl::GetFlag(FLAGS_naive_repeats) == 0) continue;
    // The naive query's rows: the same samples (FillOne's formula) as jsonb
    // rows of the layout before migration 0004, which plain SQL reads
    // directly (the packed rows need the PL/pgSQL decoder).
    if (absl::Status s = storage::pg::test_util::MakeNaiveJsonRows(
            (*db)->url(),
            absl::StrCat("SELECT ", trial, ", 'agent-0', to_timestamp(",
                         absl::ToUnixSeconds(start), " + i), jsonb_build_object("
                         "'gpu_util', CASE WHEN i % 999983 = 0 THEN 1000 "
                         "ELSE (i * 7919) % 100 END) FROM generate_series(0::bigint, ",
                         samples - 1, ") i"));
        !s.ok()) {
      std::fprintf(stderr, "bench: %s\n", s.ToString().c_str());
      return 1;
    }
  }
  const absl::Time page_t0 = absl::Now();
  if (absl::Status s = Load(
          target, 4, "agent-0", start, int64_t{page_days} * 86400, 2,
          [](v1::SystemMetricsBatch& batch, absl::Time t, int64_t i,
             bool declare) {
            if (declare) test_util::DeclareRealisticSeries(batch);
            test_util::AddRealisticReport(batch, t, i);
          });
      !s.ok()) {
    std::fprintf(stderr, "bench: load: %s\n", s.ToString().c_str());
    return 1;
  }
  std::printf("  25 series x %d days at 1 Hz: %.1f s\n", page_days,
              absl::ToDoubleSeconds(absl::Now() - page_t0));
  // The density case's history: a day at 1 Hz for each agent (trials 5 and
  // 6), ending where their last 9 minutes begin.
  const int dense_per_second = absl::GetFlag(FLAGS_dense_per_second);
  const absl::Time recent = absl::Now() - absl::Minutes(9);
  if (dense_per_second > 0) {
    for (int32_t trial : {5, 6}) {
      if (absl::Status s = Load(target, trial, "agent-0", recent - absl::Hours(24), 86400, 2,
                                RealisticEvery(recent - absl::Hours(24), absl::Seconds(1)));
          !s.ok()) {
        std::fprintf(stderr, "bench: load: %s\n", s.ToString().c_str());
        return 1;
      }
    }
  }
  // History: every window is closed. Sealed here as metricsd's sealer
  // would have within minutes, so queries read what they read in service
  // (sealed windows and their rollups), not rows waiting for a seal.
  const absl::Time seal_t0 = absl::Now();
  storage::pg::SealOptions seal;
  seal.database_url = (*db)->url();
  if (absl::Status s = storage::pg::SealClosedWindows(seal).status(); !s.ok()) {
    std::fprintf(stderr, "bench: seal: %s\n", s.ToString().c_str());
    return 1;
  }
  // And vacuumed, as autovacuum would have soon after: the seal deleted the
  // raw rows, whose dead index entries every read of the raw index would
  // otherwise step over (a week-old trial's rows have long been vacuumed).
  if (absl::Status s = storage::pg::test_util::QueryScalar((*db)->url(), "VACUUM ANALYZE").status();
      !s.ok()) {
    std::fprintf(stderr, "bench: vacuum: %s\n", s.ToString().c_str());
    return 1;
  }
  std::printf("  sealed and vacuumed: %.1f s\n\n", absl::ToDoubleSeconds(absl::Now() - seal_t0));

  std::printf("whole range at 1000 points, through gRPC (%d repeats)\n",
              absl::GetFlag(FLAGS_repeats));
  std::printf("  %-28s %9s %9s %8s %12s\n", "data", "p50 ms", "p95 ms",
              "buckets", "resolution");
  std::vector<Timing> timings;
  for (const auto& [trial, samples] : sizes) {
    Timing t = TimeQueries(*query, trial, "gpu_util");
    timings.push_back(t);
    std::printf("  %-28s %9.2f %9.2f %8d %10llds\n",
                absl::StrCat("1 series, ", samples, " samples").c_str(), t.p50,
                t.p95, t.buckets,
                static_cast<long long>(t.resolution_us / kSecond));
  }
  Timing page = TimeQueries(*query, 4, "");
  std::printf("  %-28s %9.2f %9.2f %8d %10llds\n",
              absl::StrCat("page: 25 series, ", page_days, " days").c_str(),
              page.p50, page.p95, page.buckets,
              static_cast<long long>(page.resolution_us / kSecond));

  // The density case: the last 9 minutes (rows in the open window, not
  // sealed by time yet), once a second and dense, loaded as a client would
  // send them; the dense agent is refused now and then while the sealer
  // catches up (the streamer resends). Timed once the dense agent's rows
  // waiting are down to what metricsd lets wait.
  Timing sparse, dense;
  double dense_load_s = 0;
  std::string dense_waiting = "0";
  if (dense_per_second > 0) {
    const int64_t dense_reports = int64_t{dense_per_second} * 540;
    const absl::Time dense_t0 = absl::Now();
    if (absl::Status s = Load(target, 5, "agent-0", recent, 540, 1,
                              RealisticEvery(recent, absl::Seconds(1)));
        !s.ok()) {
      std::fprintf(stderr, "bench: load: %s\n", s.ToString().c_str());
      return 1;
    }
    if (absl::Status s = Load(target, 6, "agent-0", recent, dense_reports, 2,
                              RealisticEvery(recent, absl::Seconds(1) / dense_per_second));
        !s.ok()) {
      std::fprintf(stderr, "bench: load: %s\n", s.ToString().c_str());
      return 1;
    }
    dense_load_s = absl::ToDoubleSeconds(absl::Now() - dense_t0);
    const std::string waiting_sql =
        "SELECT count(*) FROM metrics_profiling WHERE trial_id = 6 AND metric_group = 'system' "
        "AND packed_values IS NOT NULL";
    for (int i = 0; i < 600; ++i) {
      absl::StatusOr<std::string> n = storage::pg::test_util::QueryScalar((*db)->url(), waiting_sql);
      if (!n.ok()) {
        std::fprintf(stderr, "bench: %s\n", n.status().ToString().c_str());
        return 1;
      }
      dense_waiting = *n;
      if (std::stoll(*n) <= 4000) break;
      absl::SleepFor(absl::Milliseconds(100));
    }
    sparse = TimeQueries(*query, 5, "");
    dense = TimeQueries(*query, 6, "");
    std::printf("\ndensity: whole-run chart (25 series, a day and 9 minutes) at 1000 points\n");
    std::printf("  %-44s %9s %9s %8s\n", "agent", "p50 ms", "p95 ms", "buckets");
    std::printf("  %-44s %9.2f %9.2f %8d\n", "once a second", sparse.p50, sparse.p95,
                sparse.buckets);
    std::printf("  %-44s %9.2f %9.2f %8d\n",
                absl::StrCat(dense_per_second, " a second for the last 9 minutes").c_str(),
                dense.p50, dense.p95, dense.buckets);
    std::printf("  dense / once a second: %.2fx (p50); the dense 9 minutes loaded in %.1f s, "
                "%s raw rows waiting when timed\n",
                dense.p50 / std::max(sparse.p50, 1e-9), dense_load_s, dense_waiting.c_str());
  }

  std::printf("\nnaive SQL: date_bin GROUP BY over the raw rows, same buckets "
              "(%d repeats)\n", absl::GetFlag(FLAGS_naive_repeats));
  std::vector<double> naive_p50;
  for (size_t i = 0; i < sizes.size(); ++i) {
    std::vector<double> ms;
    int64_t buckets = 0;
    for (int r = 0; r < absl::GetFlag(FLAGS_naive_repeats); ++r) {
      auto timed = storage::pg::test_util::TimeNaiveBucketQuery(
          (*db)->url(), sizes[i].first, "agent-0", "gpu_util",
          absl::ToUnixMicros(start),
          absl::ToUnixMicros(start) + sizes[i].second * kSecond,
          std::max<int64_t>(1, timings[i].resolution_us));
      if (!timed.ok()) {
        std::fprintf(stderr, "bench: %s\n", timed.status().ToString().c_str());
        return 1;
      }
      ms.push_back(absl::ToDoubleMilliseconds(timed->first));
      buckets = timed->second;
    }
    naive_p50.push_back(Percentile(ms, 0.5));
    std::printf("  %-28s %9.1f ms  (%lld buckets; %.0fx the gRPC p50)\n",
                absl::StrCat("1 series, ", sizes[i].second, " samples").c_str(),
                naive_p50.back(), static_cast<long long>(buckets),
                naive_p50.back() / timings[i].p50);
  }
  metricsd->process->Signal(SIGTERM);
  (void)metricsd->process->Wait(absl::Seconds(60));

  std::printf(
      "{\"p50_ms_100k\": %.2f, \"p95_ms_100k\": %.2f, \"p50_ms_1m\": %.2f, "
      "\"p95_ms_1m\": %.2f, \"p50_ms_10m\": %.2f, \"p95_ms_10m\": %.2f, "
      "\"flatness\": %.2f, \"naive_p50_ms_10m\": %.1f, "
      "\"speedup_vs_naive_10m\": %.0f, \"page_p50_ms\": %.2f, "
      "\"page_p95_ms\": %.2f, \"density_sparse_p50_ms\": %.2f, "
      "\"density_dense_p50_ms\": %.2f, \"density_ratio\": %.2f}\n",
      timings[0].p50, timings[0].p95, timings[1].p50, timings[1].p95,
      timings[2].p50, timings[2].p95, timings[2].p50 / timings[0].p50,
      naive_p50[2], naive_p50[2] / timings[2].p50, page.p50, page.p95, sparse.p50, dense.p50,
      sparse.p50 > 0 ? dense.p50 / sparse.p50 : 0.0);
  return 0;
}

}  // namespace
}  // namespace metrics::bench

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  return metrics::bench::Run();
}
