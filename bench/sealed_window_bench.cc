// What sealing would buy, on the storage benchmark's agent (25 values a
// report at 1 s, bench/realistic_agent.h): bytes a value of the values
// sealed in windows of 1, 10 and 60 minutes (storage/format/sealed_window.h)
// against the same values packed a report at a time (packed_report.h, what a
// raw row holds today), with the time each takes to write and read them.
// No database: the value encodings alone.
//
// Usage: sealed_window_bench [--hours=6]
#include <chrono>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "bench/realistic_agent.h"
#include "storage/format/packed_report.h"
#include "storage/format/sealed_window.h"

ABSL_FLAG(int, hours, 6, "hours of reports to encode");

namespace {

using metrics::storage::SeriesValue;
using metrics::storage::WindowReport;
using Clock = std::chrono::steady_clock;

double Seconds(Clock::time_point since) {
  return std::chrono::duration<double>(Clock::now() - since).count();
}

}  // namespace

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  const int64_t count = int64_t{absl::GetFlag(FLAGS_hours)} * 3600;
  std::mt19937_64 random(17);
  metrics::v1::SystemMetricsBatch batch;
  metrics::bench::DeclareAgentSeries(batch, metrics::bench::GpuUuids(random), false);
  std::vector<WindowReport> reports;
  for (int64_t i = 0; i < count; ++i) {
    batch.clear_reports();
    metrics::bench::AddAgentReport(batch, 1763800000, i, false, random);
    const metrics::v1::SystemMetricsReport& r = batch.reports(0);
    WindowReport w;
    w.time_us = r.time().seconds() * 1000000 + r.time().nanos() / 1000;
    for (int v = 0; v < r.values_size(); ++v) {
      w.values.emplace_back(r.series(v) + 1, r.values(v));
    }
    reports.push_back(std::move(w));
  }
  const double values = static_cast<double>(count) * reports[0].values.size();

  Clock::time_point start = Clock::now();
  size_t packed_bytes = 0;
  std::string packed;
  for (const WindowReport& r : reports) {
    metrics::storage::PackReportInto(r.values, packed);
    packed_bytes += packed.size() + 8;  // and the row's time
  }
  const double pack_s = Seconds(start);
  std::printf("%.0f values (%lld reports of %zu)\n", values, static_cast<long long>(count),
              reports[0].values.size());
  std::printf("  %-34s %6.2f bytes a value, %6.1f ns a value to write\n",
              "packed a report at a time (today)", packed_bytes / values, 1e9 * pack_s / values);
  std::string json = "{";
  for (int window : {60, 600, 3600}) {
    size_t sealed_bytes = 0;
    double seal_s = 0, unseal_s = 0;
    bool exact = true;
    for (int64_t first = 0; first + window <= count; first += window) {
      const std::vector<WindowReport> part(reports.begin() + first,
                                           reports.begin() + first + window);
      start = Clock::now();
      const std::string sealed = metrics::storage::SealWindow(part);
      seal_s += Seconds(start);
      sealed_bytes += sealed.size();
      start = Clock::now();
      absl::StatusOr<std::vector<WindowReport>> back = metrics::storage::UnsealWindow(sealed);
      unseal_s += Seconds(start);
      exact = exact && back.ok() && *back == part;
    }
    const double sealed_values =
        static_cast<double>(count / window * window) * reports[0].values.size();
    std::printf("  sealed in windows of %4d s          %6.2f bytes a value, %6.1f ns to write, "
                "%5.1f ns to read, ratio to packed %.2f%s\n",
                window, sealed_bytes / sealed_values, 1e9 * seal_s / sealed_values,
                1e9 * unseal_s / sealed_values,
                (sealed_bytes / sealed_values) / (packed_bytes / values),
                exact ? "" : "  NOT EXACT");
    json += (json.size() > 1 ? ", " : "") + std::string("\"bytes_per_value_") +
            std::to_string(window) + "s\": " + std::to_string(sealed_bytes / sealed_values);
  }
  std::printf("%s, \"packed_bytes_per_value\": %.3f}\n", json.c_str(), packed_bytes / values);
  return 0;
}
