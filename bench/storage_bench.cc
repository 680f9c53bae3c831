// The storage benchmark (docs/benchmarks.md). Starts metricsd on a
// throwaway database (run it under pg_virtualenv: bench/storage.sh) and
// loads, through the
// gRPC ingest API, one agent's realistic trial: 9 host series and 2 per
// GPU for 8 GPUs with real-looking UUIDs (25 values a report, 1 s apart),
// with values as an agent has them: integers for bytes, GPU utilisation
// and open files, full-precision doubles for rates and CPU, two decimals
// for the load average, all with noise. With --gpu_signals, also the 13
// further NVML signals per GPU (129 values a report), as NVML gives them:
// integer watts' milliwatts, MHz, KB/s, degrees, mostly constant limits,
// totals, clocks and error counts. Then VACUUM ANALYZE, and a table
// of bytes per stored value for the raw partition (heap, TOAST, indexes),
// the rollups, the registry and the total, next to the same raw rows in an
// uncompressed copy of the layout before migration 0004 (the baseline).
// The last line is one JSON object.
#include <grpcpp/create_channel.h>
#include <signal.h>

#include <algorithm>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <iterator>
#include <random>
#include <thread>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "proto/metrics/v1/trials.grpc.pb.h"
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

constexpr int kGpus = 8;
// The further signals per GPU, in the order AddReport gives their values.
constexpr const char* kGpuSignals[][2] = {
    {"gpu_memory_used", "bytes"},     {"gpu_memory_total", "bytes"},
    {"gpu_memory_util", "percent"},   {"gpu_power", "watts"},
    {"gpu_power_limit", "watts"},     {"gpu_temperature", "celsius"},
    {"gpu_sm_clock", "hertz"},        {"gpu_memory_clock", "hertz"},
    {"gpu_pcie_rx", "bytes/s"},       {"gpu_pcie_tx", "bytes/s"},
    {"gpu_ecc_corrected", "errors"},  {"gpu_ecc_uncorrected", "errors"},
    {"gpu_throttle_reasons", "bitset"}};

int ValuesPerReport() {
  return 9 + kGpus * (2 + (absl::GetFlag(FLAGS_gpu_signals) ? 13 : 0));
}
constexpr int kReportsPerBatch = 600;  // an agent's batch: 10 minutes' worth
constexpr int kStreams = 2;
constexpr const char* kHostSeries[][2] = {
    {"cpu_util_simple", "percent"},      {"memory_free", "bytes"},
    {"disk_iops", "operations/s"},       {"disk_throughput_read", "bytes/s"},
    {"disk_throughput_write", "bytes/s"}, {"net_throughput_sent", "bytes/s"},
    {"net_throughput_recv", "bytes/s"},  {"load_avg", ""},
    {"open_files", ""}};

// "GPU-5f3c1c4e-8f2b-1d2e-9a3b-4c5d6e7f8a9b", as NVML names GPUs.
std::vector<std::string> GpuUuids(std::mt19937_64& random) {
  std::vector<std::string> uuids;
  for (int g = 0; g < kGpus; ++g) {
    const uint64_t a = random(), b = random();
    uuids.push_back(absl::StrFormat(
        "GPU-%08x-%04x-%04x-%04x-%012x", a >> 32, (a >> 16) & 0xffff,
        a & 0xffff, b >> 48, b & 0xffffffffffffULL));
  }
  return uuids;
}

void Declare(v1::SystemMetricsBatch& batch,
             const std::vector<std::string>& gpus) {
  for (const auto& [name, unit] : kHostSeries) {
    v1::SeriesDeclaration* s = batch.add_series();
    s->set_name(name);
    s->set_unit(unit);
  }
  for (const std::string& gpu : gpus) {
    for (const auto& [name, unit] :
         {std::pair("gpu_util", "percent"), std::pair("gpu_free_memory", "bytes")}) {
      v1::SeriesDeclaration* s = batch.add_series();
      s->set_name(name);
      s->set_gpu_uuid(gpu);
      s->set_unit(unit);
    }
  }
  if (!absl::GetFlag(FLAGS_gpu_signals)) return;
  for (const std::string& gpu : gpus) {
    for (const auto& [name, unit] : kGpuSignals) {
      v1::SeriesDeclaration* s = batch.add_series();
      s->set_name(name);
      s->set_gpu_uuid(gpu);
      s->set_unit(unit);
    }
  }
}

// Report `i`'s values, in the order Declare declares the series: what
// /proc and NVML give, with a slow daily wave and noise.
void AddReport(v1::SystemMetricsBatch& batch, int64_t start_s, int64_t i,
               std::mt19937_64& random) {
  std::uniform_real_distribution<double> noise(-1, 1);
  const double wave = std::sin(static_cast<double>(i) / 13751);
  v1::SystemMetricsReport* report = batch.add_reports();
  // The agent's clock: a sub-second phase and a few milliseconds of
  // scheduling jitter, to the nanosecond (stored to the microsecond).
  report->mutable_time()->set_seconds(start_s + i);
  report->mutable_time()->set_nanos(
      static_cast<int32_t>(412345678 + random() % 3000000));
  // A sampling interval of a little over a second, as the agent measures it.
  const double seconds = 1 + std::abs(noise(random)) * 0.003;
  const double values[] = {
      std::min(100.0, 100.0 * (4000 + 1500 * wave + 300 * noise(random)) / 8000),
      std::floor((1.35 * (1LL << 40) - i * 4096.0 + 1e8 * noise(random)) / 4096) * 4096,
      std::round(180 + 60 * wave + 40 * noise(random)) / seconds,
      std::round((5e7 + 2e7 * wave + 1e7 * noise(random)) / 4096) * 4096 / seconds,
      std::round((3e7 + 1e7 * wave + 5e6 * noise(random)) / 4096) * 4096 / seconds,
      std::round(1.2e7 + 3e6 * wave + 1e6 * noise(random)) / seconds,
      std::round(1.5e7 + 3e6 * wave + 1e6 * noise(random)) / seconds,
      std::round((6 + 2 * wave + noise(random)) * 100) / 100,
      std::round(2100 + 40 * noise(random)),
  };
  uint32_t index = 0;
  for (double v : values) {
    report->add_series(index++);
    report->add_values(v);
  }
  double free_bytes[kGpus];
  for (int g = 0; g < kGpus; ++g) {
    report->add_series(index++);
    report->add_values(std::round(std::clamp(70 + 20 * wave + 15 * noise(random), 0.0, 100.0)));
    report->add_series(index++);
    free_bytes[g] = std::round((20 + 5 * wave + g + noise(random)) * (1 << 30) / (2 << 20)) * (2 << 20);
    report->add_values(free_bytes[g]);
  }
  if (!absl::GetFlag(FLAGS_gpu_signals)) return;
  constexpr double kTotal = 85520809984;  // an H100 80GB HBM3's, as NVML says
  for (int g = 0; g < kGpus; ++g) {
    const double busy = std::clamp(0.7 + 0.2 * wave + 0.15 * noise(random), 0.0, 1.0);
    const double gpu_values[] = {
        kTotal - free_bytes[g], kTotal,
        std::round(40 * busy + 5 * noise(random)),            // memory controller %
        std::round((150 + 500 * busy + 20 * noise(random)) * 1000) / 1000,  // mW
        700,
        std::round(35 + 40 * busy + noise(random)),            // degrees
        std::round(1980 - 200 * (busy > 0.95) * std::abs(noise(random))) * 1e6,
        2619e6,
        std::round(2e5 + 5e4 * noise(random)) * 1024,          // KB/s
        std::round(1e5 + 2e4 * noise(random)) * 1024,
        static_cast<double>(i / 86400 % 3),                    // rare corrected ECC
        0,
        busy > 0.95 ? 4.0 : 0.0,                               // power cap
    };
    for (double v : gpu_values) {
      report->add_series(index++);
      report->add_values(v);
    }
  }
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
      Declare(batch, gpus);
      for (int64_t i = r; i < std::min(last, r + kReportsPerBatch); ++i) {
        AddReport(batch, start_s, i, random);
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

  auto sizes = storage::pg::test_util::MeasureStorage((*db)->url());
  if (!sizes.ok()) {
    std::fprintf(stderr, "bench: %s\n", sizes.status().ToString().c_str());
    return 1;
  }
  const double values = static_cast<double>(sizes->raw_rows) * ValuesPerReport();
  const auto per = [&](int64_t bytes) { return bytes / values; };
  const int64_t raw = sizes->raw_heap + sizes->raw_toast + sizes->raw_indexes;
  const int64_t total = raw + sizes->rollups + sizes->registry;
  const int64_t baseline = sizes->baseline_heap + sizes->baseline_toast +
                           sizes->baseline_indexes;
  std::printf("\n%.0f values (%" PRId64 " reports), loaded in %.1f s: %.0f values/s\n\n",
              values, sizes->raw_rows, load_s, values / load_s);
  std::printf("  %-34s %14s %12s\n", "part", "bytes", "bytes/value");
  const auto row = [&](const std::string& part, int64_t bytes) {
    std::printf("  %-34s %14" PRId64 " %12.2f\n", part.c_str(), bytes, per(bytes));
  };
  row("raw partition: heap", sizes->raw_heap);
  row("  of it, the values", sizes->raw_values_bytes);
  row("raw partition: TOAST", sizes->raw_toast);
  row("raw partition: indexes", sizes->raw_indexes);
  row("raw partition: total", raw);
  row(absl::StrCat("rollups (", std::size(storage::kRollupWidthsSeconds),
                   " widths)"),
      sizes->rollups);
  row("  of it, the index", sizes->rollup_indexes);
  for (const auto& width : sizes->rollup_widths) {
    row(absl::StrCat("  of it, ", width.width_s, " s stats (", width.rows,
                     " rows)").c_str(),
        width.stats_bytes);
  }
  row("registry", sizes->registry);
  row("total", total);
  row("baseline (uncompressed): heap", sizes->baseline_heap);
  row("baseline (uncompressed): TOAST", sizes->baseline_toast);
  row("baseline (uncompressed): indexes", sizes->baseline_indexes);
  row("baseline (uncompressed): total", baseline);
  std::printf(
      "{\"values\":%.0f,\"values_per_report\":%d,\"raw_bytes_per_value\":%.2f,"
      "\"rollup_bytes_per_value\":%.2f,\"total_bytes_per_value\":%.2f,"
      "\"baseline_bytes_per_value\":%.2f,\"ingest_samples_per_s\":%.0f}\n",
      values, ValuesPerReport(), per(raw), per(sizes->rollups), per(total), per(baseline),
      values / load_s);
  return 0;
}

}  // namespace
}  // namespace metrics::bench

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  return metrics::bench::Run();
}
