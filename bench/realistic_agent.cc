#include "bench/realistic_agent.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "absl/strings/str_format.h"

namespace metrics::bench {
namespace {

// The further signals per GPU, in the order AddAgentReport gives their
// values.
constexpr const char* kGpuSignals[][2] = {
    {"gpu_memory_used", "bytes"},     {"gpu_memory_total", "bytes"},
    {"gpu_memory_util", "percent"},   {"gpu_power", "watts"},
    {"gpu_power_limit", "watts"},     {"gpu_temperature", "celsius"},
    {"gpu_sm_clock", "hertz"},        {"gpu_memory_clock", "hertz"},
    {"gpu_pcie_rx", "bytes/s"},       {"gpu_pcie_tx", "bytes/s"},
    {"gpu_ecc_corrected", "errors"},  {"gpu_ecc_uncorrected", "errors"},
    {"gpu_throttle_reasons", "bitset"}};

}  // namespace

int AgentValuesPerReport(bool gpu_signals) {
  return kHostSeriesCount + kAgentGpus * (2 + (gpu_signals ? 13 : 0));
}

std::vector<std::string> GpuUuids(std::mt19937_64& random) {
  std::vector<std::string> uuids;
  for (int g = 0; g < kAgentGpus; ++g) {
    const uint64_t a = random(), b = random();
    uuids.push_back(absl::StrFormat(
        "GPU-%08x-%04x-%04x-%04x-%012x", a >> 32, (a >> 16) & 0xffff,
        a & 0xffff, b >> 48, b & 0xffffffffffffULL));
  }
  return uuids;
}

void DeclareAgentSeries(v1::SystemMetricsBatch& batch,
                        const std::vector<std::string>& gpus, bool gpu_signals) {
  for (const auto& [name, unit] : kHostSeries) {
    v1::SeriesDeclaration* s = batch.add_series();
    s->set_name(name);
    s->set_unit(unit);
  }
  for (const std::string& gpu : gpus) {
    for (const auto& [name, unit] : kGpuSeries) {
      v1::SeriesDeclaration* s = batch.add_series();
      s->set_name(name);
      s->set_gpu_uuid(gpu);
      s->set_unit(unit);
    }
  }
  if (!gpu_signals) return;
  for (const std::string& gpu : gpus) {
    for (const auto& [name, unit] : kGpuSignals) {
      v1::SeriesDeclaration* s = batch.add_series();
      s->set_name(name);
      s->set_gpu_uuid(gpu);
      s->set_unit(unit);
    }
  }
}

void AddAgentReport(v1::SystemMetricsBatch& batch, int64_t start_s, int64_t i,
                    bool gpu_signals, std::mt19937_64& random) {
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
  double free_bytes[kAgentGpus];
  for (int g = 0; g < kAgentGpus; ++g) {
    report->add_series(index++);
    report->add_values(std::round(std::clamp(70 + 20 * wave + 15 * noise(random), 0.0, 100.0)));
    report->add_series(index++);
    free_bytes[g] = std::round((20 + 5 * wave + g + noise(random)) * (1 << 30) / (2 << 20)) * (2 << 20);
    report->add_values(free_bytes[g]);
  }
  if (!gpu_signals) return;
  constexpr double kTotal = 85520809984;  // an H100 80GB HBM3's, as NVML says
  for (int g = 0; g < kAgentGpus; ++g) {
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

}  // namespace metrics::bench
