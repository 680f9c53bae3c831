// OTLP's metrics in the service's terms: trial, agent and GPU from
// attributes; host and GPU names turned into the service's series (CPU
// from per-CPU idle shares, rates from cumulative sums, GPU memory from
// limit - usage, DCGM's fields); other metrics under their own names;
// refusals counted with their reasons.
#include "server/otlp/otlp_mapping.h"

#include <map>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace metrics::server {
namespace {

namespace otlp = ::opentelemetry::proto;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Pair;
using ExportRequest = otlp::collector::metrics::v1::ExportMetricsServiceRequest;

const absl::Time kExportedAt = absl::FromUnixSeconds(1790000000);
const uint64_t kT0 = uint64_t{1790000000} * 1000000000;  // ns
constexpr uint64_t kSecond = 1000000000;

void Attribute(google::protobuf::RepeatedPtrField<otlp::common::v1::KeyValue>* to,
               const std::string& key, const std::string& value) {
  auto* kv = to->Add();
  kv->set_key(key);
  kv->mutable_value()->set_string_value(value);
}

otlp::metrics::v1::ResourceMetrics* Resource(ExportRequest& request, const std::string& trial,
                                             const std::string& host) {
  auto* rm = request.add_resource_metrics();
  if (!trial.empty()) Attribute(rm->mutable_resource()->mutable_attributes(), "trial.id", trial);
  if (!host.empty()) Attribute(rm->mutable_resource()->mutable_attributes(), "host.name", host);
  rm->add_scope_metrics();
  return rm;
}

otlp::metrics::v1::Metric* Metric(otlp::metrics::v1::ResourceMetrics* rm,
                                  const std::string& name, const std::string& unit) {
  auto* m = rm->mutable_scope_metrics(0)->add_metrics();
  m->set_name(name);
  m->set_unit(unit);
  return m;
}

otlp::metrics::v1::NumberDataPoint* Point(
    google::protobuf::RepeatedPtrField<otlp::metrics::v1::NumberDataPoint>* points,
    uint64_t time, double value,
    std::vector<std::pair<std::string, std::string>> attributes = {}) {
  auto* p = points->Add();
  p->set_time_unix_nano(time);
  p->set_start_time_unix_nano(kT0 - 100 * kSecond);
  p->set_as_double(value);
  for (const auto& [k, v] : attributes) Attribute(p->mutable_attributes(), k, v);
  return p;
}

// Every stored value, as "trial/agent/name/gpu@seconds" -> value (unit
// checked separately).
std::map<std::string, double> Values(const OtlpBatches& out,
                                     std::map<std::string, std::string>* units = nullptr) {
  std::map<std::string, double> values;
  for (const storage::MetricBatch& b : out.batches) {
    for (const storage::Report& r : b.reports) {
      for (size_t i = 0; i < r.series.size(); ++i) {
        const storage::SeriesDeclaration& s = b.series[r.series[i]];
        const std::string key =
            absl::StrCat(b.trial_id, "/", b.agent_id, "/", s.name, "/", s.gpu_uuid, "@",
                         (r.time_us - static_cast<int64_t>(kT0 / 1000)) / 1000000);
        values[key] = r.values[i];
        if (units) (*units)[s.name] = s.unit;
      }
    }
  }
  return values;
}

TEST(OtlpMappingTest, HostMetricsBecomeTheServicesSeries) {
  RateState rates;
  std::map<std::string, std::string> units;
  std::map<std::string, double> values;
  for (int step = 0; step < 2; ++step) {
    ExportRequest request;
    auto* rm = Resource(request, "7", "node-1");
    const uint64_t t = kT0 + step * 10 * kSecond;
    auto* cpu = Metric(rm, "system.cpu.utilization", "1")->mutable_gauge();
    // Two CPUs: idle 0.25 and 0.75, so 50 % busy.
    Point(cpu->mutable_data_points(), t, 0.25, {{"cpu", "0"}, {"state", "idle"}});
    Point(cpu->mutable_data_points(), t, 0.70, {{"cpu", "0"}, {"state", "user"}});
    Point(cpu->mutable_data_points(), t, 0.75, {{"cpu", "1"}, {"state", "idle"}});
    auto* memory = Metric(rm, "system.memory.linux.available", "By")->mutable_gauge();
    Point(memory->mutable_data_points(), t, 4e9);
    auto* net = Metric(rm, "system.network.io", "By")->mutable_sum();
    net->set_aggregation_temporality(otlp::metrics::v1::AGGREGATION_TEMPORALITY_CUMULATIVE);
    net->set_is_monotonic(true);
    // eth0 and eth1 send 1000 and 500 bytes/s; loopback is left out.
    Point(net->mutable_data_points(), t, 1e6 + step * 10000,
          {{"device", "eth0"}, {"direction", "transmit"}});
    Point(net->mutable_data_points(), t, 2e6 + step * 5000,
          {{"device", "eth1"}, {"direction", "transmit"}});
    Point(net->mutable_data_points(), t, 9e9 + step * 1e9,
          {{"device", "lo"}, {"direction", "transmit"}});
    OtlpBatches out = MapExport(request, rates, storage::IngestLimits(), kExportedAt);
    EXPECT_EQ(out.rejected_points, 0);
    for (const auto& [k, v] : Values(out, &units)) values[k] = v;
  }
  EXPECT_DOUBLE_EQ(values["7/node-1/cpu_util_simple/@0"], 50);
  EXPECT_DOUBLE_EQ(values["7/node-1/memory_free/@10"], 4e9);
  // The first cumulative points are the base: no rate at 0 s.
  EXPECT_EQ(values.count("7/node-1/net_throughput_sent/@0"), 0u);
  EXPECT_DOUBLE_EQ(values["7/node-1/net_throughput_sent/@10"], 1500);
  EXPECT_EQ(units["cpu_util_simple"], "percent");
  EXPECT_EQ(units["net_throughput_sent"], "bytes/s");
  EXPECT_EQ(units["memory_free"], "bytes");
}

TEST(OtlpMappingTest, GpuSignalsFromSemanticConventionsAndDcgm) {
  RateState rates;
  ExportRequest request;
  auto* rm = Resource(request, "7", "node-1");
  auto* util = Metric(rm, "hw.gpu.utilization", "1")->mutable_gauge();
  Point(util->mutable_data_points(), kT0, 0.97, {{"hw.id", "GPU-a"}});
  auto* limit = Metric(rm, "hw.gpu.memory.limit", "By")->mutable_gauge();
  Point(limit->mutable_data_points(), kT0, 80e9, {{"hw.id", "GPU-a"}});
  auto* usage = Metric(rm, "hw.gpu.memory.usage", "By")->mutable_gauge();
  Point(usage->mutable_data_points(), kT0, 60e9, {{"hw.id", "GPU-a"}});
  auto* dcgm = Metric(rm, "DCGM_FI_DEV_FB_FREE", "")->mutable_gauge();
  Point(dcgm->mutable_data_points(), kT0, 1024, {{"UUID", "GPU-b"}, {"Hostname", "x"}});
  auto* clock = Metric(rm, "DCGM_FI_DEV_SM_CLOCK", "")->mutable_gauge();
  Point(clock->mutable_data_points(), kT0, 1980, {{"UUID", "GPU-b"}});
  OtlpBatches out = MapExport(request, rates, storage::IngestLimits(), kExportedAt);
  std::map<std::string, double> values = Values(out);
  EXPECT_DOUBLE_EQ(values["7/node-1/gpu_util/GPU-a@0"], 97);
  EXPECT_DOUBLE_EQ(values["7/node-1/gpu_free_memory/GPU-a@0"], 20e9);
  EXPECT_DOUBLE_EQ(values["7/node-1/gpu_free_memory/GPU-b@0"], 1024.0 * (1 << 20));
  EXPECT_DOUBLE_EQ(values["7/node-1/gpu_sm_clock/GPU-b@0"], 1.98e9);
}

TEST(OtlpMappingTest, OtherMetricsKeepTheirNameUnitAndAttributes) {
  RateState rates;
  ExportRequest request;
  auto* rm = Resource(request, "7", "node-1");
  auto* loss = Metric(rm, "train.loss", "1")->mutable_gauge();
  Point(loss->mutable_data_points(), kT0, 0.5);
  auto* time = Metric(rm, "system.cpu.time", "s")->mutable_sum();
  Point(time->mutable_data_points(), kT0, 12, {{"state", "user"}, {"cpu", "0"}});
  Point(time->mutable_data_points(), kT0, 3, {{"state", "system"}, {"cpu", "0"}});
  std::map<std::string, std::string> units;
  std::map<std::string, double> values =
      Values(MapExport(request, rates, storage::IngestLimits(), kExportedAt), &units);
  EXPECT_DOUBLE_EQ(values["7/node-1/train.loss/@0"], 0.5);
  EXPECT_DOUBLE_EQ(values["7/node-1/system.cpu.time{cpu=0,state=user}/@0"], 12);
  EXPECT_DOUBLE_EQ(values["7/node-1/system.cpu.time{cpu=0,state=system}/@0"], 3);
  EXPECT_EQ(units["train.loss"], "1");
}

TEST(OtlpMappingTest, RefusalsAreCountedWithTheirReasonsAndTheRestKept) {
  RateState rates;
  ExportRequest request;
  auto* none = Resource(request, "", "node-1");
  Point(Metric(none, "a", "1")->mutable_gauge()->mutable_data_points(), kT0, 1);
  auto* bad = Resource(request, "seven", "node-1");
  Point(Metric(bad, "a", "1")->mutable_gauge()->mutable_data_points(), kT0, 1);
  auto* rm = Resource(request, "7", "node-1");
  Metric(rm, "latency", "ms")->mutable_histogram()->add_data_points();
  Metric(rm, "latency2", "ms")->mutable_summary()->add_data_points();
  auto* g = Metric(rm, "ok", "1")->mutable_gauge();
  Point(g->mutable_data_points(), kT0, 1);
  Point(g->mutable_data_points(), 0, 3);
  Point(g->mutable_data_points(), kT0 + 3600 * kSecond, 4);  // beyond max_future
  Point(g->mutable_data_points(), kT0 + kSecond, std::nan(""));
  OtlpBatches out = MapExport(request, rates, storage::IngestLimits(), kExportedAt);
  EXPECT_EQ(out.rejected_points, 7);
  // The first five distinct reasons.
  EXPECT_THAT(out.reasons,
              ElementsAre(HasSubstr("no trial.id"), HasSubstr("\"seven\" is not a positive"),
                          HasSubstr("latency: histograms and summaries"),
                          HasSubstr("latency2: histograms and summaries"),
                          HasSubstr("is not a time of this run")));
  EXPECT_THAT(Values(out), ElementsAre(Pair("7/node-1/ok/@0", 1)));
}

TEST(OtlpMappingTest, ASeriesRepeatedAtOneTimeKeepsBothValues) {
  RateState rates;
  ExportRequest request;
  auto* rm = Resource(request, "7", "node-1");
  auto* g = Metric(rm, "ok", "1")->mutable_gauge();
  Point(g->mutable_data_points(), kT0, 1);
  Point(g->mutable_data_points(), kT0, 2);  // the same series and time
  OtlpBatches out = MapExport(request, rates, storage::IngestLimits(), kExportedAt);
  EXPECT_EQ(out.rejected_points, 0);
  EXPECT_EQ(out.accepted_points, 2);
  ASSERT_EQ(out.batches.size(), 1u);
  ASSERT_EQ(out.batches[0].reports.size(), 2u);
  EXPECT_EQ(out.batches[0].reports[0].time_us, out.batches[0].reports[1].time_us);
  EXPECT_THAT(out.batches[0].reports[1].values, ElementsAre(2));
}

TEST(OtlpMappingTest, AnExportPastTheBatchLimitsIsSplitIntoBatchesWithinThem) {
  RateState rates;
  ExportRequest request;
  auto* rm = Resource(request, "7", "collector-host");
  for (int i = 0; i < 5000; ++i) {
    auto* g = Metric(rm, absl::StrCat("app.gauge_", i), "1")->mutable_gauge();
    Point(g->mutable_data_points(), kT0, i);
  }
  const storage::IngestLimits limits;
  OtlpBatches out = MapExport(request, rates, limits, kExportedAt);
  EXPECT_EQ(out.rejected_points, 0);
  EXPECT_EQ(out.accepted_points, 5000);
  ASSERT_EQ(out.batches.size(), 2u);
  size_t values = 0;
  for (const storage::MetricBatch& b : out.batches) {
    const absl::Status valid = storage::ValidateBatch(b, limits, kExportedAt);
    EXPECT_TRUE(valid.ok()) << valid;
    values += b.ValueCount();
  }
  EXPECT_EQ(values, 5000u);
}

TEST(OtlpMappingTest, AnAgentWhosePointsAreAllRefusedHasNoBatch) {
  RateState rates;
  ExportRequest request;
  auto* rm = Resource(request, "7", "node-1");
  auto* g = Metric(rm, "bad\x01name", "1")->mutable_gauge();
  Point(g->mutable_data_points(), kT0, 1);
  Point(g->mutable_data_points(), kT0 + kSecond, 2);
  auto* other = Resource(request, "7", "node-2");
  Point(Metric(other, "ok", "1")->mutable_gauge()->mutable_data_points(), kT0, 3);
  Point(Metric(other, "ok", "\x7f")->mutable_gauge()->mutable_data_points(), kT0, 4);
  OtlpBatches out = MapExport(request, rates, storage::IngestLimits(), kExportedAt);
  EXPECT_EQ(out.rejected_points, 3);
  EXPECT_EQ(out.accepted_points, 1);
  EXPECT_THAT(out.reasons,
              ElementsAre(HasSubstr("series name"), HasSubstr("cannot have two units")));
  ASSERT_EQ(out.batches.size(), 1u);
  EXPECT_EQ(out.batches[0].agent_id, "node-2");
  EXPECT_THAT(Values(out), ElementsAre(Pair("7/node-2/ok/@0", 3)));
}

TEST(OtlpMappingTest, RatesStartOverOnAResetAndStayBounded) {
  RateState rates(/*max_series=*/2);
  EXPECT_EQ(rates.Rate("a", 0, 1000000, 10), std::nullopt);
  EXPECT_EQ(rates.Rate("a", 0, 2000000, 30), 20);
  EXPECT_EQ(rates.Rate("a", 0, 3000000, 5), std::nullopt);  // the counter reset
  EXPECT_EQ(rates.Rate("a", 0, 4000000, 15), 10);
  EXPECT_EQ(rates.Rate("a", 0, 4000000, 15), std::nullopt);  // not newer
  EXPECT_EQ(rates.Rate("a", 7, 5000000, 20), std::nullopt);  // a new start
  rates.Rate("b", 0, 1, 1);
  rates.Rate("c", 0, 1, 1);  // beyond the bound: starts over
  EXPECT_LE(rates.size(), 2u);
}

}  // namespace
}  // namespace metrics::server
