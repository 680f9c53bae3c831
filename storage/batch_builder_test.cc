#include "storage/batch_builder.h"

#include <cmath>
#include <limits>
#include <set>

#include "absl/strings/str_cat.h"
#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace metrics::storage {
namespace {

using ::metrics::test_util::StatusIs;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::SizeIs;

const absl::Time kNow = absl::FromUnixSeconds(1800000000);
const int64_t kT = absl::ToUnixMicros(kNow - absl::Minutes(1));

BuiltValue Value(absl::string_view name, int64_t time_us, double value,
                 absl::string_view gpu = "") {
  return BuiltValue{name, gpu, "percent", time_us, std::nullopt, value};
}

// Every value of `batches` as (agent, name, GPU, time, value), to compare
// what went in with what came out whatever the split.
std::multiset<std::tuple<std::string, std::string, std::string, int64_t, double>>
Values(const std::vector<MetricBatch>& batches) {
  std::multiset<std::tuple<std::string, std::string, std::string, int64_t, double>> out;
  for (const MetricBatch& b : batches) {
    for (const Report& r : b.reports) {
      for (size_t v = 0; v < r.values.size(); ++v) {
        const SeriesDeclaration& s = b.series[r.series[v]];
        out.emplace(b.agent_id, s.name, s.gpu_uuid, r.time_us, r.values[v]);
      }
    }
  }
  return out;
}

TEST(BatchBuilderTest, ValuesOfOneInstantShareAReportAndSeriesAreDeclaredOnce) {
  const IngestLimits limits;
  BatchBuilder builder(limits, kNow);
  ASSERT_OK(builder.Add({7, "node-1"}, Value("cpu_util_simple", kT, 10)));
  ASSERT_OK(builder.Add({7, "node-1"}, Value("gpu_util", kT, 50, "GPU-0")));
  ASSERT_OK(builder.Add({7, "node-1"}, Value("cpu_util_simple", kT + 1, 11)));
  ASSERT_OK(builder.Add({7, "node-2"}, Value("cpu_util_simple", kT, 20)));
  EXPECT_EQ(builder.value_count(), 4);
  std::vector<MetricBatch> batches = std::move(builder).Take();
  ASSERT_THAT(batches, SizeIs(2));
  EXPECT_EQ(batches[0].agent_id, "node-1");
  ASSERT_THAT(batches[0].series, SizeIs(2));
  EXPECT_EQ(batches[0].series[1].gpu_uuid, "GPU-0");
  ASSERT_THAT(batches[0].reports, SizeIs(2));
  EXPECT_THAT(batches[0].reports[0].series, ElementsAre(0, 1));
  EXPECT_THAT(batches[0].reports[0].values, ElementsAre(10, 50));
  EXPECT_THAT(batches[0].reports[1].values, ElementsAre(11));
  EXPECT_EQ(batches[1].agent_id, "node-2");
  for (const MetricBatch& b : batches) EXPECT_OK(ValidateBatch(b, limits, kNow));
}

TEST(BatchBuilderTest, ASeriesRepeatedAtOneInstantStartsAnotherReportAndKeepsBoth) {
  const IngestLimits limits;
  BatchBuilder builder(limits, kNow);
  ASSERT_OK(builder.Add({7, "node-1"}, Value("cpu_util_simple", kT, 10)));
  ASSERT_OK(builder.Add({7, "node-1"}, Value("memory_free", kT, 5)));
  ASSERT_OK(builder.Add({7, "node-1"}, Value("cpu_util_simple", kT, 90)));
  ASSERT_OK(builder.Add({7, "node-1"}, Value("memory_free", kT, 6)));
  ASSERT_OK(builder.Add({7, "node-1"}, Value("cpu_util_simple", kT, 50)));
  std::vector<MetricBatch> batches = std::move(builder).Take();
  ASSERT_THAT(batches, SizeIs(1));
  ASSERT_THAT(batches[0].reports, SizeIs(3));
  EXPECT_THAT(batches[0].reports[0].values, ElementsAre(10, 5));
  EXPECT_THAT(batches[0].reports[1].values, ElementsAre(90, 6));
  EXPECT_THAT(batches[0].reports[2].values, ElementsAre(50));
  for (const Report& r : batches[0].reports) EXPECT_EQ(r.time_us, kT);
  EXPECT_OK(ValidateBatch(batches[0], limits, kNow));
}

TEST(BatchBuilderTest, TrainingBatchesOfOneInstantAreReportsOfTheirOwn) {
  const IngestLimits limits;
  BatchBuilder builder(limits, kNow);
  ASSERT_OK(builder.Add({7, "node-1", kTimingGroup},
                        {"dataloader", "", "", kT, 1, 0.5}));
  ASSERT_OK(builder.Add({7, "node-1", kTimingGroup},
                        {"dataloader", "", "", kT, 2, 0.7}));
  std::vector<MetricBatch> batches = std::move(builder).Take();
  ASSERT_THAT(batches, SizeIs(1));
  EXPECT_EQ(batches[0].metric_group, kTimingGroup);
  ASSERT_THAT(batches[0].reports, SizeIs(2));
  EXPECT_EQ(batches[0].reports[0].batch, 1);
  EXPECT_EQ(batches[0].reports[1].batch, 2);
}

TEST(BatchBuilderTest, RefusesWhatTheStoreWouldRefuseValueByValueWithTheReason) {
  const IngestLimits limits;
  BatchBuilder builder(limits, kNow);
  const double nan = std::numeric_limits<double>::quiet_NaN();
  EXPECT_THAT(builder.Add({7, "node-1"}, Value("cpu_util_simple", kT, nan)),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("NaN is not a finite number (series \"cpu_util_simple\")")));
  EXPECT_THAT(builder.Add({7, "node-1"}, Value("cpu", kT, HUGE_VAL)),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("infinity")));
  EXPECT_THAT(builder.Add({0, "node-1"}, Value("cpu", kT, 1)),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("trial 0 is not a positive trial id")));
  EXPECT_THAT(builder.Add({7, ""}, Value("cpu", kT, 1)),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("agent id: must not be empty")));
  EXPECT_THAT(builder.Add({7, "node-1", "training"}, Value("cpu", kT, 1)),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("\"training\" is not system, timing or misc")));
  EXPECT_THAT(builder.Add({7, "node-1"}, Value(std::string(200, 'x'), kT, 1)),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("series name: is 200 characters long")));
  EXPECT_THAT(builder.Add({7, "node-1"}, Value("gpu_util", kT, 1, "GPU\x01")),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("GPU UUID: has a non-printable character")));
  EXPECT_THAT(builder.Add({7, "node-1"},
                          Value("cpu", absl::ToUnixMicros(absl::FromUnixSeconds(0)), 1)),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("is before 2000-01-01T00:00:00Z")));
  EXPECT_THAT(builder.Add({7, "node-1"},
                          Value("cpu", absl::ToUnixMicros(kNow + absl::Hours(1)), 1)),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("ahead of the server's clock")));
  ASSERT_OK(builder.Add({7, "node-1"}, Value("memory_free", kT, 1)));
  EXPECT_THAT(builder.Add({7, "node-1"},
                          BuiltValue{"memory_free", "", "bytes", kT + 1, {}, 2}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("series \"memory_free\" cannot have two units (it has \"percent\")")));
  // Only the good value was taken.
  EXPECT_EQ(builder.value_count(), 1);
  std::vector<MetricBatch> batches = std::move(builder).Take();
  ASSERT_THAT(batches, SizeIs(1));
  EXPECT_THAT(batches[0].series, SizeIs(1));
  EXPECT_THAT(batches[0].reports, SizeIs(1));
}

TEST(BatchBuilderTest, AReportOfMoreSeriesThanABatchMayDeclareIsSplitAtItsInstant) {
  IngestLimits limits;
  limits.max_series_per_batch = 4;
  BatchBuilder builder(limits, kNow);
  for (int i = 0; i < 10; ++i) {
    ASSERT_OK(builder.Add({7, "host"}, Value(absl::StrCat("gauge_", i), kT, i)));
  }
  std::vector<MetricBatch> batches = std::move(builder).Take();
  ASSERT_THAT(batches, SizeIs(3));
  for (const MetricBatch& b : batches) {
    EXPECT_OK(ValidateBatch(b, limits, kNow));
    ASSERT_THAT(b.reports, SizeIs(1));
    EXPECT_EQ(b.reports[0].time_us, kT);
  }
  EXPECT_THAT(batches[0].series, SizeIs(4));
  EXPECT_THAT(batches[2].series, SizeIs(2));
  EXPECT_EQ(batches[2].series[1].name, "gauge_9");
}

TEST(BatchBuilderTest, SplitsAtEachLimitKeepingEveryValue) {
  for (const auto& [reports, values, series] :
       {std::tuple<size_t, size_t, size_t>(3, 1000, 1000), {1000, 7, 1000}, {1000, 1000, 5},
        {2, 3, 2}}) {
    IngestLimits limits;
    limits.max_reports_per_batch = reports;
    limits.max_values_per_batch = values;
    limits.max_series_per_batch = series;
    BatchBuilder builder(limits, kNow);
    BatchBuilder unsplit(IngestLimits(), kNow);
    for (int t = 0; t < 20; ++t) {
      for (int s = 0; s < 1 + t % 4; ++s) {
        const std::string name = absl::StrCat("s", (s + t) % 6);
        for (BatchBuilder* b : {&builder, &unsplit}) {
          ASSERT_OK(b->Add({7, "host"}, Value(name, kT + t, t * 10 + s)));
        }
      }
    }
    const std::vector<MetricBatch> batches = std::move(builder).Take();
    const std::vector<MetricBatch> whole = std::move(unsplit).Take();
    ASSERT_THAT(whole, SizeIs(1));
    EXPECT_GT(batches.size(), 1u);
    for (const MetricBatch& b : batches) {
      const absl::Status valid = ValidateBatch(b, limits, kNow);
      EXPECT_TRUE(valid.ok()) << valid << " (" << reports << " reports, " << values
                              << " values, " << series << " series a batch)";
      // A part declares only the series its reports use.
      std::set<uint32_t> used;
      for (const Report& r : b.reports) used.insert(r.series.begin(), r.series.end());
      EXPECT_EQ(used.size(), b.series.size());
    }
    EXPECT_EQ(Values(batches), Values(whole));
  }
}

}  // namespace
}  // namespace metrics::storage
