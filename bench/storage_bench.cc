// The storage benchmark (docs/benchmarks.md). Starts metricsd on a
// throwaway database (run it under pg_virtualenv: bench/storage.sh) and
// loads, through the gRPC ingest API, one agent's realistic trial
// (bench/realistic_agent.h: 25 values a report, 1 s apart; 129 with
// --gpu_signals). Then VACUUM ANALYZE, and a table
// of bytes per stored value for the raw partition (heap, TOAST, indexes),
// the rollups, the registry and the total, as ingested and once the sealer
// has sealed every window (storage/pg/jobs/sealer.h), next to the same raw
// rows in an uncompressed copy of the layout before migration 0004 (the
// baseline).
// The last line is one JSON object.
#include <grpcpp/create_channel.h>
#include <signal.h>

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <iterator>
#include <random>
#include <thread>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "bench/bench_loads.h"
#include "bench/cpu_time.h"
#include "bench/realistic_agent.h"
#include "proto/metrics/v1/trials.grpc.pb.h"
#include "storage/pg/jobs/sealer.h"
#include "storage/pg/testing/pg_checks.h"
#include "storage/pg/testing/storage_sizes.h"
#include "storage/rollup.h"
#include "tests/testing/resending_streamer.h"
#include "tests/testing/metricsd_process.h"
#include "tests/testing/test_database.h"

ABSL_FLAG(int64_t, values, 10000000,
          "Values to load (25 a report, 129 with --gpu_signals; a report a second).");
ABSL_FLAG(bool, gpu_signals, false,
          "Also every further GPU signal of metrics-agent (power, "
          "temperature, clocks, PCIe, ECC, ...): 129 values a report.");

namespace metrics::bench {
namespace {

using test_util::ResendingStreamer;
using test_util::StreamerOptions;

constexpr int kReportsPerBatch = 600;  // an agent's batch: 10 minutes' worth
constexpr int kStreams = 2;

int ValuesPerReport() {
  return AgentValuesPerReport(absl::GetFlag(FLAGS_gpu_signals));
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
       "--max-future=87600h", "--auth=off",
       // Sealed below, all at once, after the rows as ingested are measured.
       "--seal-every=0"});
  if (!metricsd.ok()) {
    std::fprintf(stderr, "bench: %s\n", metricsd.status().ToString().c_str());
    return 1;
  }
  const std::string target = metricsd->grpc_target;
  {
    auto trials = v1::TrialService::NewStub(
        grpc::CreateChannel(target, grpc::InsecureChannelCredentials()));
    grpc::ClientContext context;
    v1::CreateTrialRequest request;
    request.set_id(1);
    v1::Trial trial;
    if (!trials->CreateTrial(&context, request, &trial).ok()) return 1;
  }

  std::mt19937_64 random(19);
  const std::vector<std::string> gpus = GpuUuids(random);
  const int64_t reports = absl::GetFlag(FLAGS_values) / ValuesPerReport();
  const int64_t start_s = 1700000000;
  // The batches first, so the clock runs over ingest alone.
  std::vector<std::vector<v1::SystemMetricsBatch>> streams(kStreams);
  const int64_t per_stream = (reports + kStreams - 1) / kStreams;
  for (int s = 0; s < kStreams; ++s) {
    const int64_t last = std::min(reports, (s + 1) * per_stream);
    for (int64_t r = s * per_stream; r < last; r += kReportsPerBatch) {
      v1::SystemMetricsBatch batch;
      batch.set_trial_id(1);
      batch.set_agent_id("node-17.cluster.example.com");
      DeclareAgentSeries(batch, gpus, absl::GetFlag(FLAGS_gpu_signals));
      for (int64_t i = r; i < std::min(last, r + kReportsPerBatch); ++i) {
        AddAgentReport(batch, start_s, i, absl::GetFlag(FLAGS_gpu_signals), random);
      }
      streams[s].push_back(std::move(batch));
    }
  }
  std::printf("loading %" PRId64 " reports of %d values through gRPC ingest ...\n",
              reports, ValuesPerReport());
  std::fflush(stdout);
  const absl::Time t0 = absl::Now();
  std::vector<std::thread> threads;
  std::vector<absl::Status> results(kStreams);
  for (int s = 0; s < kStreams; ++s) {
    threads.emplace_back([&, s] {
      StreamerOptions options;
      options.stream_id = absl::StrCat("storage-bench/", s);
      options.trial_id = 1;
      options.window = 4;
      options.timeout = absl::Minutes(30);
      ResendingStreamer streamer([&] { return target; }, options);
      results[s] = streamer.SendAll(std::move(streams[s]));
    });
  }
  for (std::thread& t : threads) t.join();
  const double load_s = absl::ToDoubleSeconds(absl::Now() - t0);
  for (const absl::Status& r : results) {
    if (!r.ok()) {
      std::fprintf(stderr, "bench: load: %s\n", r.ToString().c_str());
      return 1;
    }
  }
  metricsd->process->Signal(SIGTERM);
  (void)metricsd->process->Wait(absl::Seconds(60));

  auto ingested = storage::pg::test_util::MeasureStorage((*db)->url());
  if (!ingested.ok()) {
    std::fprintf(stderr, "bench: %s\n", ingested.status().ToString().c_str());
    return 1;
  }
  // What the sealer makes of it: every window is closed (the data is old).
  storage::pg::SealOptions seal;
  seal.database_url = (*db)->url();
  // Whose CPU the seal takes: PostgreSQL's, and the sealer's (this process).
  const absl::StatusOr<pid_t> postmaster = BenchPostmaster();
  if (!postmaster.ok()) {
    std::fprintf(stderr, "bench: %s\n", postmaster.status().ToString().c_str());
    return 1;
  }
  const CpuUse seal_cpu_before = CpuUse::Now(*postmaster, {});
  const absl::Time seal_start = absl::Now();
  auto sealed_summary = storage::pg::SealClosedWindows(seal);
  const double seal_s = absl::ToDoubleSeconds(absl::Now() - seal_start);
  const CpuUse seal_cpu = CpuUse::Now(*postmaster, {}) - seal_cpu_before;
  if (!sealed_summary.ok()) {
    std::fprintf(stderr, "bench: seal: %s\n", sealed_summary.status().ToString().c_str());
    return 1;
  }
  // The seal's deleted rows are autovacuum's work in service: a plain
  // VACUUM of them, its CPU counted beside the seal's.
  const CpuUse vacuum_before = CpuUse::Now(*postmaster, {});
  if (auto vacuum = storage::pg::test_util::QueryScalar((*db)->url(), "VACUUM metrics_profiling");
      !vacuum.ok()) {
    std::fprintf(stderr, "bench: %s\n", vacuum.status().ToString().c_str());
    return 1;
  }
  const CpuUse vacuum_cpu = CpuUse::Now(*postmaster, {}) - vacuum_before;
  // While agents stream, raw rows are only their open windows; this load
  // put every report there at once, and PostgreSQL keeps a table's and an
  // index's emptied pages for reuse. Compacted to the size they have then
  // (as the peers are measured after their compaction).
  if (auto compact = storage::pg::test_util::QueryScalar(
          (*db)->url(), "VACUUM FULL metrics_profiling");
      !compact.ok()) {
    std::fprintf(stderr, "bench: %s\n", compact.status().ToString().c_str());
    return 1;
  }
  auto sealed = storage::pg::test_util::MeasureStorage((*db)->url(),
                                                      storage::pg::test_util::Baseline::kSkip);
  if (!sealed.ok()) {
    std::fprintf(stderr, "bench: %s\n", sealed.status().ToString().c_str());
    return 1;
  }
  const double values = static_cast<double>(ingested->reports) * ValuesPerReport();
  const auto per = [&](int64_t bytes) { return bytes / values; };
  const auto raw = [](const storage::pg::test_util::StorageSizes& s) {
    return s.raw_heap + s.raw_toast + s.raw_indexes;
  };
  const auto total = [&](const storage::pg::test_util::StorageSizes& s) {
    return raw(s) + s.rollups + s.registry;
  };
  const int64_t baseline = ingested->baseline_heap + ingested->baseline_toast +
                           ingested->baseline_indexes;
  std::printf("\n%.0f values (%" PRId64 " reports), loaded in %.1f s: %.0f values/s; "
              "sealed in %.1f s (%" PRId64 " windows)\n\n",
              values, ingested->reports, load_s, values / load_s, seal_s,
              sealed_summary->windows);
  std::printf("the seal's CPU a report: PostgreSQL %.1f us, the sealer %.1f us; "
              "vacuuming the rows it deleted: PostgreSQL %.1f us\n\n",
              1e6 * seal_cpu.postgres / ingested->reports,
              1e6 * seal_cpu.client / ingested->reports,
              1e6 * vacuum_cpu.postgres / ingested->reports);
  std::printf("  %-34s %14s %12s %14s %12s\n", "part", "as ingested", "bytes/value", "sealed",
              "bytes/value");
  const auto row = [&](const std::string& part, int64_t before, int64_t after) {
    std::printf("  %-34s %14" PRId64 " %12.2f %14" PRId64 " %12.2f\n", part.c_str(), before,
                per(before), after, per(after));
  };
  row("raw partition: heap", ingested->raw_heap, sealed->raw_heap);
  row("  of it, the values", ingested->raw_values_bytes, sealed->raw_values_bytes);
  row("raw partition: TOAST", ingested->raw_toast, sealed->raw_toast);
  row("raw partition: indexes", ingested->raw_indexes, sealed->raw_indexes);
  row("raw partition: total", raw(*ingested), raw(*sealed));
  row(absl::StrCat("rollups (", std::size(storage::kRollupWidthsSeconds), " widths)"),
      ingested->rollups, sealed->rollups);
  row("  of it, the index", ingested->rollup_indexes, sealed->rollup_indexes);
  // By the sealed rows' widths: the sealer writes the rollups.
  for (const auto& width : sealed->rollup_widths) {
    int64_t as_ingested = 0;
    for (const auto& w : ingested->rollup_widths) {
      if (w.width_s == width.width_s) as_ingested = w.stats_bytes;
    }
    row(absl::StrCat("  of it, ", width.width_s, " s stats (", width.rows, " rows)"), as_ingested,
        width.stats_bytes);
  }
  row("registry", ingested->registry, sealed->registry);
  row("total", total(*ingested), total(*sealed));
  std::printf("  %-34s %14" PRId64 " %12.2f\n", "baseline (uncompressed): total", baseline,
              per(baseline));
  std::printf(
      "{\"values\":%.0f,\"values_per_report\":%d,\"raw_bytes_per_value\":%.2f,"
      "\"rollup_bytes_per_value\":%.2f,\"total_bytes_per_value\":%.2f,"
      "\"unsealed_total_bytes_per_value\":%.2f,"
      "\"baseline_bytes_per_value\":%.2f,\"ingest_samples_per_s\":%.0f,\"seal_s\":%.1f,"
      "\"seal_postgres_us_per_report\":%.1f,\"seal_sealer_us_per_report\":%.1f}\n",
      values, ValuesPerReport(), per(raw(*sealed)), per(sealed->rollups), per(total(*sealed)),
      per(total(*ingested)), per(baseline), values / load_s, seal_s,
      1e6 * seal_cpu.postgres / ingested->reports, 1e6 * seal_cpu.client / ingested->reports);
  return 0;
}

}  // namespace
}  // namespace metrics::bench

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  return metrics::bench::Run();
}
