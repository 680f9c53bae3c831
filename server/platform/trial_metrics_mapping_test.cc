// ReportTrialMetrics' bodies, as the platform's harness writes them, read
// by the route's JSON rules and mapped: the profiling groups' shapes to
// system series (GPU UUIDs, mount paths, units, the report's time, its
// stream and run), non-finite values dropped and counted, the other groups
// to generic reports as sent; every refusal names the field.
#include "server/platform/trial_metrics_mapping.h"

#include <google/protobuf/util/json_util.h>

#include <limits>

#include "absl/strings/str_cat.h"
#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/rest/json_body.h"

namespace metrics::server {
namespace {

using ::metrics::test_util::StatusIs;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Pair;
using ::testing::SizeIs;

const absl::Time kReportedAt = absl::FromUnixSeconds(1796083200);  // 2026-12-01
constexpr absl::string_view kTime = "2026-12-01T00:00:57.937236+00:00";
const int64_t kTimeUs = int64_t{1796083257} * 1000000 + 937236;

// A body's request, parsed as the route parses it.
determined::api::v1::ReportTrialMetricsRequest Request(absl::string_view body) {
  determined::api::v1::ReportTrialMetricsRequest request;
  JsonBodyOptions options;
  options.python_non_finite = true;
  const absl::Status parsed = ParseJsonBody(body, {}, &request, options);
  EXPECT_TRUE(parsed.ok()) << parsed;
  return request;
}

// The harness's body of one group (0.32 and later send the unset fields as
// null).
std::string Body(absl::string_view group, absl::string_view avg,
                 absl::string_view time = kTime) {
  return absl::StrCat(R"({"metrics": {"metrics": {"avgMetrics": )", avg,
                      R"(, "batchMetrics": null}, "trialId": 7, "trialRunId": 2, )",
                      R"("stepsCompleted": null, "reportTime": ")", time, R"("}, "group": ")",
                      group, R"("})");
}

absl::StatusOr<MappedTrialMetrics> Map(absl::string_view body) {
  return MapTrialMetrics(Request(body), storage::IngestLimits(), kReportedAt);
}

// series "name/gpu" (unit) -> value, of one agent's batch.
std::map<std::string, std::pair<std::string, double>> Values(
    const storage::MetricBatch& batch) {
  std::map<std::string, std::pair<std::string, double>> values;
  for (const storage::Report& r : batch.reports) {
    for (size_t i = 0; i < r.values.size(); ++i) {
      const storage::SeriesDeclaration& s = batch.series[r.series[i]];
      values[absl::StrCat(s.name, "/", s.gpu_uuid)] = {s.unit, r.values[i]};
    }
  }
  return values;
}

TEST(TrialMetricsMappingTest, TheGpuGroupNestsGpuUuidsUnderTheAgent) {
  ASSERT_OK_AND_ASSIGN(
      MappedTrialMetrics mapped,
      Map(Body("gpu", R"({"node-1": {"GPU-a": {"gpu_util": 42.5, "gpu_free_memory": 79e9},
                                     "GPU-b": {"gpu_util": 0, "gpu_free_memory": 1e9}}})")));
  ASSERT_TRUE(mapped.profiling.has_value());
  EXPECT_FALSE(mapped.generic.has_value());
  ASSERT_THAT(mapped.profiling->batches, SizeIs(1));
  const storage::MetricBatch& b = mapped.profiling->batches[0];
  EXPECT_EQ(b.trial_id, 7);
  EXPECT_EQ(b.agent_id, "node-1");
  EXPECT_EQ(b.metric_group, storage::kSystemGroup);
  EXPECT_EQ(b.run_id, 2);
  ASSERT_THAT(b.reports, SizeIs(1));
  EXPECT_EQ(b.reports[0].time_us, kTimeUs);
  // The report's time is its sequence on its agent's (group) stream.
  EXPECT_EQ(b.stream_id, ProfilingStreamId("gpu", "node-1"));
  EXPECT_EQ(b.sequence, kTimeUs);
  EXPECT_TRUE(b.sequence_is_time);
  EXPECT_THAT(Values(b),
              ElementsAre(Pair("gpu_free_memory/GPU-a", Pair("bytes", 79e9)),
                          Pair("gpu_free_memory/GPU-b", Pair("bytes", 1e9)),
                          Pair("gpu_util/GPU-a", Pair("percent", 42.5)),
                          Pair("gpu_util/GPU-b", Pair("percent", 0))));
}

TEST(TrialMetricsMappingTest, TheDiskGroupsMountsBecomeSeriesNamesAndEachGroupItsUnits) {
  ASSERT_OK_AND_ASSIGN(
      MappedTrialMetrics disk,
      Map(Body("disk", R"({"node-1": {"disk_iops": 12, "disk_throughput_read": 1024,
                                      "disk_throughput_write": 2048,
                                      "/": {"disk_util": 55.5},
                                      "/run/determined/workdir/shared_fs": {"disk_util": 7}}})")));
  ASSERT_THAT(disk.profiling->batches, SizeIs(1));
  EXPECT_THAT(Values(disk.profiling->batches[0]),
              ElementsAre(Pair("disk_iops/", Pair("operations/s", 12)),
                          Pair("disk_throughput_read/", Pair("bytes/s", 1024)),
                          Pair("disk_throughput_write/", Pair("bytes/s", 2048)),
                          Pair("disk_util{mount=/run/determined/workdir/shared_fs}/",
                               Pair("percent", 7)),
                          Pair("disk_util{mount=/}/", Pair("percent", 55.5))));
  for (const auto& [group, avg, name, unit] :
       {std::tuple("cpu", R"({"n": {"cpu_util_simple": 3.5}})", "cpu_util_simple/", "percent"),
        {"memory", R"({"n": {"memory_free": 8e9}})", "memory_free/", "bytes"},
        {"network", R"({"n": {"net_throughput_sent": 10}})", "net_throughput_sent/", "bytes/s"},
        {"network", R"({"n": {"net_throughput_recv": 10}})", "net_throughput_recv/", "bytes/s"},
        {"cpu", R"({"n": {"a_new_one": 1}})", "a_new_one/", ""}}) {
    ASSERT_OK_AND_ASSIGN(MappedTrialMetrics m, Map(Body(group, avg)));
    ASSERT_THAT(m.profiling->batches, SizeIs(1));
    EXPECT_EQ(Values(m.profiling->batches[0]).begin()->first, name);
    EXPECT_EQ(Values(m.profiling->batches[0]).begin()->second.first, unit);
  }
}

TEST(TrialMetricsMappingTest, EachAgentIsABatchOfItsOwnStream) {
  ASSERT_OK_AND_ASSIGN(MappedTrialMetrics m,
                       Map(Body("cpu", R"({"b": {"cpu_util_simple": 1}, "a": {"cpu_util_simple": 2}})")));
  ASSERT_THAT(m.profiling->batches, SizeIs(2));
  EXPECT_EQ(m.profiling->batches[0].agent_id, "a");
  EXPECT_EQ(m.profiling->batches[1].stream_id, ProfilingStreamId("cpu", "b"));
  // No client's stream id (printable ASCII) can be one of these.
  EXPECT_EQ(ProfilingStreamId("cpu", "b")[0], '\x01');
}

TEST(TrialMetricsMappingTest, NonFiniteValuesInBothFormsAreDroppedAndCounted) {
  // Python's json writes bare tokens; the harness's own encoder strings.
  ASSERT_OK_AND_ASSIGN(
      MappedTrialMetrics m,
      Map(Body("disk", R"({"node-1": {"disk_iops": NaN, "disk_throughput_read": Infinity,
                                      "disk_throughput_write": "-Infinity",
                                      "/": {"disk_util": "NaN"}, "x": 1}})")));
  ASSERT_THAT(m.profiling->batches, SizeIs(1));
  EXPECT_THAT(Values(m.profiling->batches[0]), ElementsAre(Pair("x/", Pair("", 1))));
  EXPECT_THAT(m.profiling->dropped, ElementsAre(Pair("node-1", 4)));
  // An agent with nothing but such values has no batch.
  ASSERT_OK_AND_ASSIGN(MappedTrialMetrics none,
                       Map(Body("cpu", R"({"node-1": {"cpu_util_simple": NaN}})")));
  EXPECT_THAT(none.profiling->batches, SizeIs(0));
  EXPECT_THAT(none.profiling->dropped, ElementsAre(Pair("node-1", 1)));
}

TEST(TrialMetricsMappingTest, BothHarnessFormsAndNoReportTimeAreTaken) {
  // 0.30 and 0.31 leave stepsCompleted and batchMetrics out.
  ASSERT_OK_AND_ASSIGN(
      MappedTrialMetrics old,
      Map(R"({"metrics": {"metrics": {"avgMetrics": {"n": {"memory_free": 5}}}, "trialId": 7,
              "trialRunId": 1, "reportTime": "2026-12-01T00:00:57+00:00"}, "group": "memory"})"));
  EXPECT_EQ(old.profiling->batches[0].reports[0].time_us, int64_t{1796083257} * 1000000);
  // Without a time, the server's.
  ASSERT_OK_AND_ASSIGN(
      MappedTrialMetrics now,
      Map(R"({"metrics": {"metrics": {"avgMetrics": {"n": {"memory_free": 5}}}, "trialId": 7,
              "trialRunId": 1}, "group": "memory"})"));
  EXPECT_EQ(now.profiling->batches[0].reports[0].time_us, absl::ToUnixMicros(kReportedAt));
}

TEST(TrialMetricsMappingTest, RefusalsNameTheFieldAsTheHarnessSendsIt) {
  for (const auto& [body, words] : std::vector<std::pair<std::string, std::string>>{
           {Body("gpu", R"({"node-1": {"GPU-x": {"gpu_util": true}}})"),
            R"(metrics.metrics.avgMetrics["node-1"]["GPU-x"].gpu_util: not a number, got true)"},
           {Body("gpu", R"({"node-1": {"GPU-x": {"gpu_util": {"deeper": 1}}}})"),
            R"(avgMetrics["node-1"]["GPU-x"].gpu_util: nested deeper than {agent: {GPU UUID: {name: value}}})"},
           {Body("disk", R"({"node-1": {"/": {"disk_util": [1]}}})"),
            R"(avgMetrics["node-1"]["/"].disk_util: not a number, got an array)"},
           {Body("cpu", R"({"node-1": {"x": {"cpu_util_simple": 1}}})"),
            "the cpu group has no labels below the agent"},
           {Body("cpu", R"({"node-1": 5})"),
            R"(avgMetrics["node-1"]: expected an object of the agent's metrics, got a number)"},
           {Body("cpu", R"({"node-1": {"cpu_util_simple": "high"}})"),
            R"(.cpu_util_simple: not a number, got the string "high")"},
           {Body("cpu", R"({"node-1": {"cpu_util_simple": null}})"), "not a number, got null"},
           {Body("cpu", R"({"": {"cpu_util_simple": 1}})"), "(the agent id): must not be empty"},
           {Body("cpu", R"({"node-1": {"a\u0001b": 1}})"),
            R"(avgMetrics["node-1"][(a key of 3 bytes)]: series name: has a non-printable)"},
           {Body("cpu", R"({"n": {"cpu_util_simple": 1}})", "1999-01-01T00:00:00Z"),
            "metrics.reportTime: 1999-01-01T00:00:00Z is before 2000"},
           {Body("", R"({})"), "group: must not be empty"},
           {Body("a.b", R"({})"), R"(group: "a.b" must not contain ".")"},
           {R"({"metrics": {"trialId": 7, "trialRunId": -1}, "group": "cpu"})",
            "metrics.trialRunId: must not be negative"},
           {R"({"metrics": {"trialId": 0}, "group": "cpu"})",
            "metrics.trialId: must be a positive trial id"},
           {R"({"metrics": {"trialId": 7, "metrics": {"avgMetrics": {"epoch": "one"}}},
                "group": "training"})",
            R"(metrics.metrics.avgMetrics.epoch: must be a number, got the string "one")"},
           {R"({"metrics": {"trialId": 7, "metrics": {"avgMetrics": {"a": {"b\u0000": 1}}}},
                "group": "training"})",
            R"(metrics.metrics.avgMetrics.a[(a key of 2 bytes)]: a NUL character (\u0000) cannot)"},
           {R"({"metrics": {"trialId": 7, "metrics": {"batchMetrics": [{"x": ["\u0000"]}]}},
                "group": "mine"})",
            R"(metrics.metrics.batchMetrics[0].x[0]: a NUL character)"},
       }) {
    EXPECT_THAT(Map(body), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr(words)))
        << body;
  }
}

TEST(TrialMetricsMappingTest, AnAgentsReportMustFitOneBatch) {
  std::string gpus = "{";
  for (int i = 0; i < 2100; ++i) {
    absl::StrAppend(&gpus, i ? "," : "", "\"GPU-", i, R"(": {"gpu_util": 1, "gpu_free_memory": 2})");
  }
  gpus += "}";
  EXPECT_THAT(Map(Body("gpu", absl::StrCat(R"({"node-1": )", gpus, "}"))),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("4200 values is more than the limit of 4096 a report")));
}

TEST(TrialMetricsMappingTest, OtherGroupsAreTheirGenericRowAsSent) {
  ASSERT_OK_AND_ASSIGN(
      MappedTrialMetrics m,
      Map(R"({"metrics": {"metrics": {"avgMetrics": {"loss": 0.25, "acc": NaN, "name": "x"},
                                       "batchMetrics": [{"loss": 0.3}, {"loss": 0.2}]},
                          "trialId": 7, "trialRunId": 3, "stepsCompleted": 100,
                          "reportTime": "2026-12-01T00:00:57.937236+00:00"},
              "group": "training"})"));
  ASSERT_TRUE(m.generic.has_value());
  EXPECT_FALSE(m.profiling.has_value());
  const storage::GenericReport& r = *m.generic;
  EXPECT_EQ(r.trial_id, 7);
  EXPECT_EQ(r.run_id, 3);
  EXPECT_EQ(r.group, "training");
  EXPECT_EQ(r.steps_completed, 100);
  EXPECT_EQ(r.time_us, kTimeUs);
  google::protobuf::Struct avg;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(r.avg_metrics, &avg).ok());
  EXPECT_EQ(avg.fields().at("loss").number_value(), 0.25);
  // Kept as the platform keeps it: the string.
  EXPECT_EQ(avg.fields().at("acc").string_value(), "NaN");
  EXPECT_EQ(r.batch_metrics, R"([{"loss":0.3},{"loss":0.2}])");
  // A gRPC client can send a non-finite number: stored as the platform's
  // string for it.
  determined::api::v1::ReportTrialMetricsRequest grpc;
  grpc.set_group("my_group");
  grpc.mutable_metrics()->set_trial_id(7);
  (*grpc.mutable_metrics()->mutable_metrics()->mutable_avg_metrics()->mutable_fields())["x"]
      .set_number_value(-std::numeric_limits<double>::infinity());
  ASSERT_OK_AND_ASSIGN(MappedTrialMetrics custom,
                       MapTrialMetrics(grpc, storage::IngestLimits(), kReportedAt));
  EXPECT_EQ(custom.generic->avg_metrics, R"({"x":"-Infinity"})");
  EXPECT_FALSE(custom.generic->steps_completed.has_value());
  EXPECT_FALSE(custom.generic->time_us.has_value());
  EXPECT_FALSE(custom.generic->batch_metrics.has_value());
}

}  // namespace
}  // namespace metrics::server
