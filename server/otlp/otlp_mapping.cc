#include "server/otlp/otlp_mapping.h"

#include <algorithm>
#include <cmath>
#include <iterator>
#include <map>
#include <tuple>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/vocabulary/signals.h"
#include "storage/batch_builder.h"
#include "storage/batch_validation.h"

namespace metrics::server {

namespace {

namespace otlp = ::opentelemetry::proto;
using Attributes = google::protobuf::RepeatedPtrField<otlp::common::v1::KeyValue>;

constexpr double kMebibyte = 1 << 20;

// An attribute's value as text (strings as they are; numbers and booleans
// printed); empty for arrays, maps and bytes.
std::string Text(const otlp::common::v1::AnyValue& v) {
  switch (v.value_case()) {
    case otlp::common::v1::AnyValue::kStringValue:
      return v.string_value();
    case otlp::common::v1::AnyValue::kIntValue:
      return absl::StrCat(v.int_value());
    case otlp::common::v1::AnyValue::kDoubleValue:
      return absl::StrCat(v.double_value());
    case otlp::common::v1::AnyValue::kBoolValue:
      return v.bool_value() ? "true" : "false";
    default:
      return "";
  }
}

// The value of the first of `keys` the attributes have; null when none.
const otlp::common::v1::AnyValue* Locate(const Attributes& attributes,
                                         std::initializer_list<absl::string_view> keys) {
  for (absl::string_view key : keys) {
    for (const auto& kv : attributes) {
      if (kv.key() == key) return &kv.value();
    }
  }
  return nullptr;
}

// That value as text.
std::optional<std::string> Find(const Attributes& attributes,
                                std::initializer_list<absl::string_view> keys) {
  const otlp::common::v1::AnyValue* v = Locate(attributes, keys);
  if (v == nullptr) return std::nullopt;
  return Text(*v);
}

// The same without a copy for string values (most are): a view of the
// attribute's string, or of `scratch` holding another value's text; empty
// when none of `keys` is there.
absl::string_view FindView(const Attributes& attributes,
                           std::initializer_list<absl::string_view> keys, std::string& scratch) {
  const otlp::common::v1::AnyValue* v = Locate(attributes, keys);
  if (v == nullptr) return "";
  if (v->value_case() == otlp::common::v1::AnyValue::kStringValue) return v->string_value();
  scratch = Text(*v);
  return scratch;
}

constexpr std::initializer_list<absl::string_view> kGpuKeys = {"gpu.uuid", "hw.id",
                                                                "UUID"};

bool IsGpuKey(absl::string_view key) {
  return std::find(kGpuKeys.begin(), kGpuKeys.end(), key) != kGpuKeys.end();
}

// A metric renamed one to one: its signal and the scale to the signal's
// unit.
struct Rename {
  signals::Signal signal;
  double scale;
};

const absl::flat_hash_map<absl::string_view, Rename>& Renames() {
  static const auto* renames = new absl::flat_hash_map<absl::string_view, Rename>{
      {"system.memory.linux.available", {signals::kMemoryFree, 1}},
      {"system.linux.memory.available", {signals::kMemoryFree, 1}},
      {"hw.gpu.utilization", {signals::kGpuUtil, 100}},
      {"DCGM_FI_DEV_GPU_UTIL", {signals::kGpuUtil, 1}},
      {"DCGM_FI_DEV_FB_FREE", {signals::kGpuFreeMemory, kMebibyte}},
      {"DCGM_FI_DEV_FB_USED", {signals::kGpuMemoryUsed, kMebibyte}},
      {"DCGM_FI_DEV_MEM_COPY_UTIL", {signals::kGpuMemoryUtil, 1}},
      {"DCGM_FI_DEV_POWER_USAGE", {signals::kGpuPower, 1}},
      {"DCGM_FI_DEV_GPU_TEMP", {signals::kGpuTemperature, 1}},
      {"DCGM_FI_DEV_SM_CLOCK", {signals::kGpuSmClock, 1e6}},
      {"DCGM_FI_DEV_MEM_CLOCK", {signals::kGpuMemoryClock, 1e6}},
  };
  return *renames;
}

// A cumulative metric whose rate, summed over devices, is a series: by the
// point's "direction" attribute (empty: either).
struct RateTarget {
  signals::Signal read_or_receive;
  signals::Signal write_or_transmit;
};

const absl::flat_hash_map<absl::string_view, RateTarget>& RateTargets() {
  static const auto* targets = new absl::flat_hash_map<absl::string_view, RateTarget>{
      {"system.network.io", {signals::kNetThroughputRecv, signals::kNetThroughputSent}},
      {"system.disk.io", {signals::kDiskThroughputRead, signals::kDiskThroughputWrite}},
      {"system.disk.operations", {signals::kDiskIops, signals::kDiskIops}},
  };
  return *targets;
}

using AgentKey = std::pair<int32_t, std::string>;  // (trial, agent)

// A sum over points of one instant, emitted only when every point of it
// had a value (a device's first cumulative point has no rate yet).
struct Sum {
  double total = 0;
  int points = 0;
  int valued = 0;
};

class Mapper {
 public:
  Mapper(RateState& rates, const storage::IngestLimits& limits, absl::Time now,
         std::optional<int32_t> only_trial)
      : rates_(rates), limits_(limits), now_(now), only_trial_(only_trial) {}

  void Resource(const otlp::metrics::v1::ResourceMetrics& rm) {
    const Attributes& attributes = rm.resource().attributes();
    int64_t points = 0;
    for (const auto& sm : rm.scope_metrics()) {
      for (const auto& m : sm.metrics()) points += PointCount(m);
    }
    const std::optional<std::string> trial_text =
        Find(attributes, {"trial.id", "determined.trial.id"});
    int32_t trial = 0;
    if (!trial_text || !absl::SimpleAtoi(*trial_text, &trial) || trial <= 0) {
      Reject(points, trial_text
                         ? absl::StrCat("resource attribute trial.id \"",
                                        trial_text->substr(0, 32),
                                        "\" is not a positive trial id")
                         : "a resource has no trial.id attribute");
      return;
    }
    if (only_trial_ && trial != *only_trial_) {
      Reject(points, absl::StrCat("trial ", trial, ": the token is for trial ",
                                  *only_trial_, " only"));
      return;
    }
    const std::optional<std::string> agent = Find(attributes, {"host.name", "agent.id"});
    if (!agent) {
      Reject(points, "a resource has no host.name or agent.id attribute");
      return;
    }
    if (absl::Status s = storage::ValidateLabel("resource attribute host.name", *agent,
                                                limits_.max_label_length, false);
        !s.ok()) {
      Reject(points, s.message());
      return;
    }
    const AgentKey key{trial, *agent};
    for (const auto& sm : rm.scope_metrics()) {
      for (const auto& m : sm.metrics()) Metric(key, m);
    }
  }

  OtlpBatches Finish() {
    for (const auto& [k, sum] : sums_) {
      const auto& [agent, name, unit, gpu, time_us] = k;
      if (sum.valued == sum.points) Add(agent, name, gpu, unit, time_us, sum.total);
    }
    for (const auto& [k, idle] : idle_) {
      const auto& [agent, time_us] = k;
      if (idle.points > 0) {
        Add(agent, signals::kCpuUtilSimple.name, "", signals::kCpuUtilSimple.unit, time_us,
            100 * (1 - idle.total / idle.points));
      }
    }
    for (const auto& [k, m] : gpu_memory_) {
      const auto& [agent, gpu, time_us] = k;
      if (m.first && m.second) {
        Add(agent, signals::kGpuFreeMemory.name, gpu, signals::kGpuFreeMemory.unit, time_us,
            *m.first - *m.second);
      }
    }
    out_.batches = std::move(builder_).Take();
    return std::move(out_);
  }

 private:
  static int64_t PointCount(const otlp::metrics::v1::Metric& m) {
    switch (m.data_case()) {
      case otlp::metrics::v1::Metric::kGauge:
        return m.gauge().data_points_size();
      case otlp::metrics::v1::Metric::kSum:
        return m.sum().data_points_size();
      case otlp::metrics::v1::Metric::kHistogram:
        return m.histogram().data_points_size();
      case otlp::metrics::v1::Metric::kExponentialHistogram:
        return m.exponential_histogram().data_points_size();
      case otlp::metrics::v1::Metric::kSummary:
        return m.summary().data_points_size();
      default:
        return 0;
    }
  }

  void Reject(int64_t points, absl::string_view reason) {
    if (points <= 0) return;
    out_.rejected_points += points;
    if (out_.reasons.size() < kMaxOtlpReasons &&
        std::find(out_.reasons.begin(), out_.reasons.end(), reason) ==
            out_.reasons.end()) {
      out_.reasons.emplace_back(reason);
    }
  }

  void Metric(const AgentKey& agent, const otlp::metrics::v1::Metric& m) {
    const google::protobuf::RepeatedPtrField<otlp::metrics::v1::NumberDataPoint>* points;
    bool cumulative = false, delta = false;
    switch (m.data_case()) {
      case otlp::metrics::v1::Metric::kGauge:
        points = &m.gauge().data_points();
        break;
      case otlp::metrics::v1::Metric::kSum:
        points = &m.sum().data_points();
        cumulative = m.sum().aggregation_temporality() ==
                     otlp::metrics::v1::AGGREGATION_TEMPORALITY_CUMULATIVE;
        delta = m.sum().aggregation_temporality() ==
                otlp::metrics::v1::AGGREGATION_TEMPORALITY_DELTA;
        break;
      case otlp::metrics::v1::Metric::DATA_NOT_SET:
        return;
      default:
        Reject(PointCount(m), absl::StrCat("metric ", m.name().substr(0, 64),
                                           ": histograms and summaries are not "
                                           "supported"));
        return;
    }
    // What the metric becomes, looked up once for all its points.
    Kind kind;
    if (m.name() == "system.cpu.utilization") {
      kind.cpu_utilization = true;
    } else if (m.name() == "hw.gpu.memory.limit" || m.name() == "hw.gpu.memory.usage") {
      kind.gpu_memory = m.name() == "hw.gpu.memory.limit" ? 1 : 2;
    } else if (auto r = RateTargets().find(m.name());
               r != RateTargets().end() && (cumulative || delta)) {
      kind.rate = &r->second;
    } else if (auto r = Renames().find(m.name()); r != Renames().end()) {
      kind.rename = &r->second;
    }
    for (const auto& p : *points) Point(agent, m, kind, p, delta);
  }

  // Which of the mapping's rules a metric follows; none: its own name.
  struct Kind {
    bool cpu_utilization = false;
    int gpu_memory = 0;  // 1 limit, 2 usage
    const RateTarget* rate = nullptr;
    const Rename* rename = nullptr;
  };

  void Point(const AgentKey& agent, const otlp::metrics::v1::Metric& m, const Kind& kind,
             const otlp::metrics::v1::NumberDataPoint& p, bool delta) {
    const absl::string_view where = absl::string_view(m.name()).substr(0, 64);
    double value;
    if (p.value_case() == otlp::metrics::v1::NumberDataPoint::kAsDouble) {
      value = p.as_double();
    } else if (p.value_case() == otlp::metrics::v1::NumberDataPoint::kAsInt) {
      value = static_cast<double>(p.as_int());
    } else {
      Reject(1, absl::StrCat("metric ", where, ": a data point has no value"));
      return;
    }
    if (!std::isfinite(value)) {
      Reject(1, absl::StrCat("metric ", where, ": a value is not finite"));
      return;
    }
    const int64_t time_us = static_cast<int64_t>(p.time_unix_nano() / 1000);
    const absl::Time time = absl::FromUnixMicros(time_us);
    if (p.time_unix_nano() == 0 || time < earliest_ ||
        time > now_ + limits_.max_future) {
      Reject(1, absl::StrCat("metric ", where, ": time_unix_nano ", p.time_unix_nano(),
                             " is not a time of this run"));
      return;
    }
    const int64_t start_us = static_cast<int64_t>(p.start_time_unix_nano() / 1000);
    std::string gpu_scratch;
    const absl::string_view gpu = FindView(p.attributes(), kGpuKeys, gpu_scratch);
    ++out_.accepted_points;

    if (kind.cpu_utilization) {
      // The mean over CPUs of the idle share: one idle point per CPU.
      if (Find(p.attributes(), {"state", "system.cpu.state"}) == "idle") {
        Sum& idle = idle_[{agent, time_us}];
        idle.total += value;
        ++idle.points;
      }
      return;
    }
    if (kind.gpu_memory != 0) {
      auto& pair = gpu_memory_[{agent, std::string(gpu), time_us}];
      (kind.gpu_memory == 1 ? pair.first : pair.second) = value;
      return;
    }
    if (kind.rate != nullptr) {
      const std::string device =
          Find(p.attributes(), {"device", "system.device"}).value_or("");
      if (std::find(std::begin(signals::kNetworkDevicesLeftOut),
                    std::end(signals::kNetworkDevicesLeftOut),
                    device) != std::end(signals::kNetworkDevicesLeftOut)) {
        return;
      }
      const std::string direction =
          Find(p.attributes(), {"direction", "network.io.direction",
                                "disk.io.direction"})
              .value_or("");
      const bool in = direction == "receive" || direction == "read";
      const signals::Signal& signal =
          in ? kind.rate->read_or_receive : kind.rate->write_or_transmit;
      Sum& sum = sums_[{agent, std::string(signal.name), std::string(signal.unit),
                        std::string(gpu), time_us}];
      ++sum.points;
      std::optional<double> rate;
      if (delta) {
        if (start_us > 0 && time_us > start_us) {
          rate = value / ((time_us - start_us) / 1e6);
        }
      } else {
        rate = rates_.Rate(absl::StrCat(agent.first, "/", agent.second, "/",
                                        m.name(), "/", device, "/", direction,
                                        "/", gpu),
                           start_us, time_us, value);
      }
      if (rate) {
        sum.total += *rate;
        ++sum.valued;
      }
      return;
    }
    if (kind.rename != nullptr) {
      Add(agent, kind.rename->signal.name, gpu, kind.rename->signal.unit, time_us,
          value * kind.rename->scale);
      return;
    }
    // Its own name, with the attributes that tell its series apart.
    std::vector<std::pair<std::string, std::string>> labels;
    for (const auto& kv : p.attributes()) {
      if (!IsGpuKey(kv.key())) labels.emplace_back(kv.key(), Text(kv.value()));
    }
    if (labels.empty()) {
      Add(agent, m.name(), gpu, m.unit(), time_us, value);
      return;
    }
    std::sort(labels.begin(), labels.end());
    Add(agent,
        absl::StrCat(m.name(), "{", absl::StrJoin(labels, ",", absl::PairFormatter("=")), "}"),
        gpu, m.unit(), time_us, value);
  }

  // One value into the (trial, agent)'s batch (storage/batch_builder.h: a
  // value the store would refuse is refused alone, with its reason).
  void Add(const AgentKey& agent, absl::string_view name, absl::string_view gpu,
           absl::string_view unit, int64_t time_us, double value) {
    if (absl::Status added = builder_.Add({agent.first, agent.second},
                                          {name, gpu, unit, time_us, std::nullopt, value});
        !added.ok()) {
      --out_.accepted_points;
      Reject(1, absl::StrCat("metric ", name.substr(0, 64), ": ", added.message()));
    }
  }

  RateState& rates_;
  const storage::IngestLimits& limits_;
  const absl::Time now_;
  const std::optional<int32_t> only_trial_;
  const absl::Time earliest_ = storage::EarliestReportTime();
  OtlpBatches out_;
  storage::BatchBuilder builder_{limits_, now_};
  std::map<std::tuple<AgentKey, std::string, std::string, std::string, int64_t>, Sum> sums_;
  std::map<std::pair<AgentKey, int64_t>, Sum> idle_;
  std::map<std::tuple<AgentKey, std::string, int64_t>,
           std::pair<std::optional<double>, std::optional<double>>>
      gpu_memory_;
};

}  // namespace

std::optional<double> RateState::Rate(const std::string& series, int64_t start_us,
                                      int64_t time_us, double value) {
  absl::MutexLock lock(&mu_);
  auto it = points_.find(series);
  if (it == points_.end()) {
    // Bounded: when full, start over rather than grow (each series then
    // loses one rate).
    if (points_.size() >= max_series_) points_.clear();
    points_.emplace(series, Point{start_us, time_us, value});
    return std::nullopt;
  }
  const Point previous = it->second;
  if (time_us <= previous.time_us) return std::nullopt;  // old or repeated
  it->second = Point{start_us, time_us, value};
  if (start_us != previous.start_us || value < previous.value) return std::nullopt;
  return (value - previous.value) / ((time_us - previous.time_us) / 1e6);
}

size_t RateState::size() const {
  absl::MutexLock lock(&mu_);
  return points_.size();
}

OtlpBatches MapExport(
    const opentelemetry::proto::collector::metrics::v1::ExportMetricsServiceRequest&
        request,
    RateState& rates, const storage::IngestLimits& limits, absl::Time now,
    std::optional<int32_t> only_trial) {
  Mapper mapper(rates, limits, now, only_trial);
  for (const auto& rm : request.resource_metrics()) mapper.Resource(rm);
  return mapper.Finish();
}

}  // namespace metrics::server
