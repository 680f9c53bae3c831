#include "client/system_sampler.h"

#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "client/signal_value.h"

namespace metrics::client {

namespace {

constexpr double kSectorBytes = 512;  // /proc/diskstats' unit, always

// Sums the growth of `field` over the keys present in both maps; a counter
// that was reset leaves its device out.
template <typename Map, typename Field>
double SumDeltas(const Map& before, const Map& after, Field field) {
  double sum = 0;
  for (const auto& [name, now] : after) {
    auto it = before.find(name);
    if (it == before.end()) continue;  // appeared since the last sample
    if (std::optional<uint64_t> d = CounterDelta(field(it->second), field(now))) {
      sum += static_cast<double>(*d);
    }
  }
  return sum;
}

}  // namespace

absl::StatusOr<std::unique_ptr<SystemSampler>> SystemSampler::Create(
    SamplerOptions options, std::chrono::steady_clock::time_point now) {
  std::unique_ptr<SystemSampler> sampler(new SystemSampler(std::move(options)));
  std::vector<absl::Status> errors;
  sampler->previous_ = sampler->ReadCounters(errors);
  sampler->previous_time_ = now;
  if (errors.size() == 3) {
    return absl::FailedPreconditionError(absl::StrCat(
        "cannot read ", sampler->options_.proc_root, ": ", errors[0].message()));
  }
  if (sampler->options_.job) {
    absl::StatusOr<std::unique_ptr<JobSampler>> job =
        JobSampler::Create(*sampler->options_.job, now);
    if (!job.ok()) return job.status();
    sampler->job_ = *std::move(job);
  }
  return sampler;
}

int SystemSampler::gpu_count() const {
  return options_.nvml ? static_cast<int>(options_.nvml->uuids().size()) : 0;
}

absl::StatusOr<std::string> SystemSampler::ReadProcFile(const char* name) const {
  const std::string path = absl::StrCat(options_.proc_root, "/", name);
  std::ifstream file(path);
  if (!file) return absl::UnavailableError(absl::StrCat("cannot open ", path));
  std::ostringstream text;
  text << file.rdbuf();
  return text.str();
}

SystemSampler::Counters SystemSampler::ReadCounters(
    std::vector<absl::Status>& errors) const {
  Counters c;
  auto read = [&](const char* name, auto parse, auto& out) {
    absl::StatusOr<std::string> text = ReadProcFile(name);
    if (!text.ok()) {
      errors.push_back(text.status());
      return;
    }
    auto parsed = parse(*text);
    if (!parsed.ok()) {
      errors.push_back(parsed.status());
      return;
    }
    out = *std::move(parsed);
  };
  read("stat", ParseProcStat, c.cpu);
  read("diskstats", ParseDiskStats, c.disks);
  read("net/dev", ParseNetDev, c.net);
  return c;
}

void SystemSampler::AddRates(const Counters& now, double seconds,
                             Sample& sample) {
  auto add = [&](const signals::Signal& signal, double value) {
    sample.measurements.push_back(SignalValue(signal, value));
  };
  if (now.cpu && previous_.cpu && now.cpu->total > previous_.cpu->total &&
      now.cpu->busy >= previous_.cpu->busy) {
    const double busy = static_cast<double>(now.cpu->busy - previous_.cpu->busy);
    const double total =
        static_cast<double>(now.cpu->total - previous_.cpu->total);
    add(signals::kCpuUtilSimple, std::min(100.0, 100.0 * busy / total));
  }
  if (seconds <= 0) return;
  if (now.disks && previous_.disks) {
    const auto& before = *previous_.disks;
    const auto& after = *now.disks;
    const double ios =
        SumDeltas(before, after, [](const DiskCounters& d) { return d.reads; }) +
        SumDeltas(before, after, [](const DiskCounters& d) { return d.writes; });
    add(signals::kDiskIops, ios / seconds);
    add(signals::kDiskThroughputRead,
        kSectorBytes *
            SumDeltas(before, after, [](const DiskCounters& d) { return d.read_sectors; }) /
            seconds);
    add(signals::kDiskThroughputWrite,
        kSectorBytes *
            SumDeltas(before, after, [](const DiskCounters& d) { return d.write_sectors; }) /
            seconds);
  }
  if (now.net && previous_.net) {
    add(signals::kNetThroughputSent,
        SumDeltas(*previous_.net, *now.net, [](const NetCounters& n) { return n.sent_bytes; }) /
            seconds);
    add(signals::kNetThroughputRecv,
        SumDeltas(*previous_.net, *now.net,
                  [](const NetCounters& n) { return n.received_bytes; }) /
            seconds);
  }
}

Sample SystemSampler::Take(std::chrono::steady_clock::time_point now) {
  Sample sample;
  Counters counters = ReadCounters(sample.errors);
  const double seconds =
      std::chrono::duration<double>(now - previous_time_).count();
  AddRates(counters, seconds, sample);
  // A source that failed now has no base, so its next rate is skipped
  // rather than spread over the wrong interval.
  previous_ = std::move(counters);
  previous_time_ = now;

  absl::StatusOr<std::string> meminfo = ReadProcFile("meminfo");
  absl::StatusOr<int64_t> available =
      meminfo.ok() ? ParseMemAvailableBytes(*meminfo) : meminfo.status();
  if (available.ok()) {
    sample.measurements.push_back(
        SignalValue(signals::kMemoryFree, static_cast<double>(*available)));
  } else {
    sample.errors.push_back(available.status());
  }
  if (options_.nvml) {
    absl::StatusOr<std::vector<GpuReading>> gpus = options_.nvml->Read();
    if (!gpus.ok()) {
      sample.errors.push_back(gpus.status());
    } else {
      for (const GpuReading& g : *gpus) {
        if (g.utilization_percent.has_value()) {
          sample.measurements.push_back(
              SignalValue(signals::kGpuUtil, *g.utilization_percent, *g.uuid));
        }
        sample.measurements.push_back(SignalValue(
            signals::kGpuFreeMemory, static_cast<double>(g.free_memory_bytes), *g.uuid));
        for (const GpuValue& v : g.values) {
          sample.measurements.push_back({v.name, v.value, v.unit, *g.uuid});
        }
      }
    }
  }
  if (job_) job_->Take(now, options_.nvml.get(), sample.measurements, sample.errors);
  if (options_.nvml) {
    for (std::string& note : options_.nvml->TakeNotes()) {
      sample.errors.push_back(absl::UnimplementedError(note));
    }
  }
  return sample;
}

}  // namespace metrics::client
