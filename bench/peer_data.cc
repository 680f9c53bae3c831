#include "bench/peer_data.h"

#include <charconv>
#include <cstdio>
#include <memory>
#include <random>

#include "absl/strings/str_cat.h"
#include "bench/realistic_agent.h"

namespace metrics::bench {
namespace {

// The spikes, one in each of 24 series (so no two share a chart bucket):
// each GPU's utilisation and free memory dropped to 0, and every host
// series but the free memory at ten times its value (the CPU at 100 %).
constexpr int kSpikes = 24;
constexpr int64_t kSpikeSpacingS = 3600 / kSpikes;

// Appends `v` in the shortest decimal that reads back as the same double.
void AppendDouble(std::string& out, double v) {
  char buffer[32];
  const auto result = std::to_chars(buffer, buffer + sizeof buffer, v);
  out.append(buffer, result.ptr);
}

}  // namespace

PeerData PeerData::Generate(int64_t start_s, int64_t reports) {
  PeerData data;
  // The storage benchmark's generator and seed: the same values.
  std::mt19937_64 random(19);
  const std::vector<std::string> gpus = GpuUuids(random);
  v1::SystemMetricsBatch scratch;
  DeclareAgentSeries(scratch, gpus, /*gpu_signals=*/false);
  for (const v1::SeriesDeclaration& s : scratch.series()) {
    data.series_.push_back({s.name(), s.gpu_uuid()});
  }
  const size_t width = data.series_.size();
  data.time_us_.reserve(reports);
  data.values_.reserve(reports * width);
  for (int64_t i = 0; i < reports; ++i) {
    scratch.clear_reports();
    AddAgentReport(scratch, start_s, i, /*gpu_signals=*/false, random);
    const v1::SystemMetricsReport& report = scratch.reports(0);
    data.time_us_.push_back(report.time().seconds() * 1000000 +
                            report.time().nanos() / 1000);
    for (double v : report.values()) data.values_.push_back(v);
  }
  if (reports < 3600) return data;  // too short to hold the spikes
  std::vector<int> spiked;
  for (int g = 0; g < kAgentGpus; ++g) {
    spiked.push_back(kHostSeriesCount + 2 * g);      // utilisation
    spiked.push_back(kHostSeriesCount + 2 * g + 1);  // free memory
  }
  for (int s = 0; s < kHostSeriesCount; ++s) {
    if (std::string(kHostSeries[s][0]) != "memory_free") spiked.push_back(s);
  }
  for (int j = 0; j < kSpikes; ++j) {
    Spike spike;
    spike.report = reports - 3600 + j * kSpikeSpacingS + kSpikeSpacingS / 2;
    spike.series = spiked[j];
    spike.dip = spike.series >= kHostSeriesCount;
    const double was = data.value(spike.report, spike.series);
    spike.value = spike.dip ? 0 : spike.series == 0 ? 100 : 10 * was;
    data.values_[spike.report * width + spike.series] = spike.value;
    data.spikes_.push_back(spike);
  }
  return data;
}

std::vector<v1::SystemMetricsBatch> PeerData::Batches(int32_t trial,
                                                      int64_t first,
                                                      int64_t last,
                                                      int per_batch) const {
  std::vector<v1::SystemMetricsBatch> batches;
  for (int64_t r = first; r < last; r += per_batch) {
    v1::SystemMetricsBatch& batch = batches.emplace_back();
    batch.set_trial_id(trial);
    batch.set_agent_id(kAgent);
    for (const SeriesLabels& labels : series_) {
      v1::SeriesDeclaration* s = batch.add_series();
      s->set_name(labels.name);
      s->set_gpu_uuid(labels.gpu_uuid);
    }
    for (int64_t i = r; i < std::min(last, r + per_batch); ++i) {
      v1::SystemMetricsReport* report = batch.add_reports();
      report->mutable_time()->set_seconds(time_us_[i] / 1000000);
      report->mutable_time()->set_nanos(
          static_cast<int32_t>(time_us_[i] % 1000000 * 1000));
      for (size_t s = 0; s < series_.size(); ++s) {
        report->add_series(static_cast<uint32_t>(s));
        report->add_values(value(i, static_cast<int>(s)));
      }
    }
  }
  return batches;
}

std::string PeerData::PeerLabels(int s) const {
  std::string labels = absl::StrCat("name=\"", series_[s].name, "\",agent=\"",
                                    kAgent, "\"");
  if (!series_[s].gpu_uuid.empty()) {
    absl::StrAppend(&labels, ",gpu=\"", series_[s].gpu_uuid, "\"");
  }
  return labels;
}

absl::Status PeerData::WriteOpenMetrics(int64_t first, int64_t last,
                                        const std::string& path) const {
  std::unique_ptr<FILE, int (*)(FILE*)> file(std::fopen(path.c_str(), "w"),
                                             &std::fclose);
  if (file == nullptr) {
    return absl::UnavailableError(absl::StrCat("cannot write ", path));
  }
  std::string chunk = absl::StrCat("# TYPE ", kPeerMetric, " gauge\n");
  for (int s = 0; s < static_cast<int>(series_.size()); ++s) {
    const std::string prefix = absl::StrCat(kPeerMetric, "{", PeerLabels(s), "} ");
    for (int64_t r = first; r < last; ++r) {
      chunk += prefix;
      AppendDouble(chunk, value(r, s));
      // OpenMetrics times are seconds.
      const int64_t ms = time_ms(r);
      char millis[8];
      std::snprintf(millis, sizeof millis, ".%03d", static_cast<int>(ms % 1000));
      absl::StrAppend(&chunk, " ", ms / 1000, millis, "\n");
      if (chunk.size() > (1 << 20)) {
        if (std::fwrite(chunk.data(), 1, chunk.size(), file.get()) != chunk.size()) {
          return absl::UnavailableError(absl::StrCat("cannot write ", path));
        }
        chunk.clear();
      }
    }
  }
  chunk += "# EOF\n";
  if (std::fwrite(chunk.data(), 1, chunk.size(), file.get()) != chunk.size() ||
      std::fflush(file.get()) != 0) {
    return absl::UnavailableError(absl::StrCat("cannot write ", path));
  }
  return absl::OkStatus();
}

std::string PeerData::VictoriaMetricsLines(int64_t first, int64_t last) const {
  std::string lines;
  for (int s = 0; s < static_cast<int>(series_.size()); ++s) {
    absl::StrAppend(&lines, "{\"metric\":{\"__name__\":\"", kPeerMetric,
                    "\",\"name\":\"", series_[s].name, "\",\"agent\":\"", kAgent,
                    "\"");
    if (!series_[s].gpu_uuid.empty()) {
      absl::StrAppend(&lines, ",\"gpu\":\"", series_[s].gpu_uuid, "\"");
    }
    lines += "},\"values\":[";
    for (int64_t r = first; r < last; ++r) {
      if (r > first) lines += ',';
      AppendDouble(lines, value(r, s));
    }
    lines += "],\"timestamps\":[";
    for (int64_t r = first; r < last; ++r) {
      if (r > first) lines += ',';
      absl::StrAppend(&lines, time_ms(r));
    }
    lines += "]}\n";
  }
  return lines;
}

}  // namespace metrics::bench
