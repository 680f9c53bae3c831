// Summaries over the real store on PostgreSQL: every pooled bucket against
// the test's own sums of the samples it sent (count, min, max, first and
// last exact, mean to rounding), a stalled GPU on one node showing in that node's min,
// runs laid on one grid relative to their starts, one GPU chosen, and the
// refusals.
#include "query/summary.h"

#include <cmath>
#include <map>
#include <random>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "storage/pg/pg_metric_store.h"
#include "tests/testing/test_database.h"

namespace metrics::query {
namespace {

using ::metrics::test_util::StatusIs;
using ::metrics::test_util::TestDatabase;
using ::testing::HasSubstr;
using storage::BatchOutcome;
using storage::MetricBatch;

constexpr int64_t kSecond = 1000000;
const absl::Time kT0 = absl::FromUnixSeconds(1763800003);  // not aligned
constexpr int kAgents = 4, kGpus = 4;
constexpr int kSeconds = 2 * 3600;
// Trial 12 starts 37 minutes and a fraction after trial 11.
const absl::Time kT12 = kT0 + absl::Seconds(37 * 60 + 17) + absl::Microseconds(250000);
// Node 2's GPU 3 stalls for one sample.
constexpr int kStallAt = 4000;

struct Sent {
  int64_t time_us;
  int gpu;  // -1: the agent-wide series
  double value;
};

struct Shared {
  std::unique_ptr<TestDatabase> db;
  std::unique_ptr<storage::pg::PgMetricStore> store;
  std::unique_ptr<QueryEngine> engine;
  // trial -> agent -> samples sent
  std::map<int32_t, std::map<std::string, std::vector<Sent>>> sent;
};
Shared& S() {
  static auto* shared = new Shared();
  return *shared;
}

absl::Time Deadline() { return absl::Now() + absl::Seconds(60); }

void Submit(MetricBatch batch) {
  absl::Notification done;
  BatchOutcome outcome;
  ASSERT_OK(S().store->SubmitBatch(std::move(batch), [&](BatchOutcome o) {
    outcome = std::move(o);
    done.Notify();
  }));
  ASSERT_TRUE(done.WaitForNotificationWithTimeout(absl::Seconds(60)));
  ASSERT_EQ(outcome.kind, BatchOutcome::Kind::kStored) << outcome.status;
}

void Seed(int32_t trial, absl::Time start, int agents, int seconds) {
  ASSERT_OK(S().store->CreateTrial(trial, Deadline()));
  std::mt19937 random(trial);
  for (int a = 0; a < agents; ++a) {
    const std::string agent = absl::StrCat("node-", a);
    std::vector<Sent>& sent = S().sent[trial][agent];
    MetricBatch batch;
    int64_t sequence = 0;
    for (int t = 0; t < seconds; ++t) {
      if (batch.reports.empty()) {
        batch = MetricBatch();
        batch.stream_id = absl::StrCat(agent, "/s");
        batch.trial_id = trial;
        batch.agent_id = agent;
        batch.series = {{"cpu_util_simple", "", "percent"}};
        for (int g = 0; g < kGpus; ++g) {
          batch.series.push_back({"gpu_util", absl::StrCat("GPU-", a, "-", g), "percent"});
        }
      }
      storage::Report report;
      // Each agent's clock a little apart from the others'.
      report.time_us = absl::ToUnixMicros(start + absl::Seconds(t) +
                                          absl::Microseconds(a * 1000 + random() % 1000));
      for (int s = -1; s < kGpus; ++s) {
        double value = s < 0 ? 20 + random() % 100 / 10.0
                             : 80 + random() % 1000 / 100.0;
        if (trial == 11 && a == 2 && s == 3 && t == kStallAt) value = 0;
        report.series.push_back(static_cast<uint32_t>(s + 1));
        report.values.push_back(value);
        sent.push_back({report.time_us, s, value});
      }
      batch.reports.push_back(std::move(report));
      if (batch.reports.size() == 1000 || t == seconds - 1) {
        batch.sequence = ++sequence;
        Submit(std::move(batch));
        batch = MetricBatch();
      }
    }
  }
}

class SummaryTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    ASSERT_OK_AND_ASSIGN(S().db, TestDatabase::Create());
    storage::pg::PgMetricStoreOptions options;
    options.database_url = S().db->url();
    options.clock = [] { return kT0 + absl::Hours(24 * 365); };
    S().store = storage::pg::PgMetricStore::Create(options);
    S().engine = std::make_unique<QueryEngine>(&S().store->Reads(), QueryOptions());
    Seed(11, kT0, kAgents, kSeconds);
    Seed(12, kT12, 1, kSeconds / 2);
    ASSERT_OK(S().store->CreateTrial(13, Deadline()));  // no data
  }

  // The store's threads stop before the process's statics go (libpqxx's
  // among them, which its change listener still reads).
  static void TearDownTestSuite() {
    S().engine.reset();
    S().store.reset();
    S().db.reset();
  }
};

struct Expected {
  int64_t count = 0;
  double sum = 0, min = INFINITY, max = -INFINITY;
  int64_t first_time_us = 0, last_time_us = 0;
  double first_value = 0, last_value = 0;
};

// The test's own pooling of what it sent: trial's samples of `gpus` (true:
// the GPU series, false: the agent-wide one) of `agents` ("" all), in
// [bucket, bucket + width). At equal times (the GPUs of one report) the
// first is the first GPU's and the last the last GPU's, agents in order.
Expected Oracle(int32_t trial, const std::string& agent, bool gpus,
                std::optional<int> gpu_index, int64_t bucket, int64_t width) {
  Expected e;
  for (const auto& [name, samples] : S().sent[trial]) {
    if (!agent.empty() && name != agent) continue;
    for (const Sent& s : samples) {
      if ((s.gpu >= 0) != gpus || s.time_us < bucket || s.time_us >= bucket + width) continue;
      if (gpu_index && s.gpu >= 0 && s.gpu != *gpu_index) continue;
      if (e.count == 0 || s.time_us < e.first_time_us) {
        e.first_time_us = s.time_us;
        e.first_value = s.value;
      }
      if (e.count == 0 || s.time_us >= e.last_time_us) {
        e.last_time_us = s.time_us;
        e.last_value = s.value;
      }
      ++e.count;
      e.sum += s.value;
      e.min = std::min(e.min, s.value);
      e.max = std::max(e.max, s.value);
    }
  }
  return e;
}

void ExpectMatchesOracle(const SummarySeries& s, std::optional<int> gpu_index = std::nullopt) {
  const SeriesData& d = s.data;
  ASSERT_GT(d.resolution_us, 0);
  ASSERT_FALSE(d.bucket_start_us.empty());
  const bool gpus = d.series.name == "gpu_util";
  for (size_t i = 0; i < d.bucket_start_us.size(); ++i) {
    const Expected e = Oracle(s.trial_id, d.series.agent_id, gpus, gpu_index,
                              d.bucket_start_us[i], d.resolution_us);
    SCOPED_TRACE(absl::StrCat("trial ", s.trial_id, " agent '", d.series.agent_id, "' ",
                              d.series.name, " bucket ", d.bucket_start_us[i]));
    ASSERT_EQ(d.count[i], e.count);
    ASSERT_EQ(d.min[i], e.min);
    ASSERT_EQ(d.max[i], e.max);
    ASSERT_NEAR(d.mean[i], e.sum / e.count, 1e-9 * std::abs(e.sum / e.count));
    ASSERT_EQ(d.first_time_us[i], e.first_time_us);
    ASSERT_EQ(d.first_value[i], e.first_value);
    ASSERT_EQ(d.last_time_us[i], e.last_time_us);
    ASSERT_EQ(d.last_value[i], e.last_value);
  }
}

const SummarySeries* Find(const SummaryResult& r, int32_t trial, const std::string& agent,
                          const std::string& name) {
  for (const SummarySeries& s : r.series) {
    if (s.trial_id == trial && s.data.series.agent_id == agent && s.data.series.name == name) {
      return &s;
    }
  }
  return nullptr;
}

TEST_F(SummaryTest, EachAgentsGpusPooledExactlyAndAStalledGpuShowsInItsNodesMin) {
  SummaryRequest request;
  request.trial_ids = {11};
  request.by_agent = true;
  request.max_points = 200;
  ASSERT_OK_AND_ASSIGN(SummaryResult r, Summarize(*S().engine, request, Deadline()));
  ASSERT_EQ(r.series.size(), 2u * kAgents);  // cpu and GPU of each node
  // 2 h / 200 is below the finest rollup (1 min): buckets of the raw rows,
  // whole milliseconds, a little wider so the aligned buckets fit.
  EXPECT_GE(r.resolution_us, 36 * kSecond);
  EXPECT_LT(r.resolution_us, 37 * kSecond);
  for (const SummarySeries& s : r.series) {
    ExpectMatchesOracle(s);
    EXPECT_EQ(s.agent_count, 1);
    EXPECT_EQ(s.gpu_count, s.data.series.name == "gpu_util" ? kGpus : 0);
    EXPECT_EQ(s.data.resolution_us, r.resolution_us);
  }
  for (int a = 0; a < kAgents; ++a) {
    const SummarySeries* s = Find(r, 11, absl::StrCat("node-", a), "gpu_util");
    ASSERT_NE(s, nullptr);
    const double lowest = *std::min_element(s->data.min.begin(), s->data.min.end());
    EXPECT_EQ(lowest == 0, a == 2) << "node-" << a << "'s lowest " << lowest;
  }
}

TEST_F(SummaryTest, RunsComparedOnOneGridRelativeToTheirStarts) {
  SummaryRequest request;
  request.trial_ids = {12, 11, 13};  // 13 has no data
  request.relative = true;
  request.names = {"gpu_util"};
  request.max_points = 100;
  ASSERT_OK_AND_ASSIGN(SummaryResult r, Summarize(*S().engine, request, Deadline()));
  EXPECT_EQ(r.start_us, 0);
  // Trial 11's length, the longest (its agents' clocks up to 4 ms apart).
  EXPECT_GT(r.end_us, int64_t{kSeconds - 1} * kSecond);
  EXPECT_LT(r.end_us, int64_t{kSeconds - 1} * kSecond + 4000);
  ASSERT_EQ(r.series.size(), 2u);
  EXPECT_EQ(r.series[0].trial_id, 12);  // the request's order
  EXPECT_EQ(r.series[1].trial_id, 11);
  for (const SummarySeries& s : r.series) {
    ExpectMatchesOracle(s);
    EXPECT_EQ(s.origin_us % r.resolution_us, 0);
    EXPECT_EQ(s.data.bucket_start_us.front() - s.origin_us, 0);
    for (int64_t start : s.data.bucket_start_us) {
      EXPECT_EQ((start - s.origin_us) % r.resolution_us, 0);
    }
  }
  EXPECT_EQ(r.series[0].gpu_count, kGpus);
  EXPECT_EQ(r.series[1].gpu_count, kAgents * kGpus);
  EXPECT_EQ(r.series[1].agent_count, kAgents);
  EXPECT_LE(r.series[0].data.bucket_start_us.back() - r.series[0].origin_us,
            int64_t{kSeconds / 2} * kSecond);

  // The first ten minutes of each: a finer grid, from raw samples.
  request.offset_end = absl::Minutes(10);
  ASSERT_OK_AND_ASSIGN(r, Summarize(*S().engine, request, Deadline()));
  EXPECT_EQ(r.end_us, 600 * kSecond);
  EXPECT_EQ(r.resolution_us, 6 * kSecond);
  ASSERT_EQ(r.series.size(), 2u);
  for (const SummarySeries& s : r.series) ExpectMatchesOracle(s);
}

TEST_F(SummaryTest, OneGpuOfEachAgentInAWallClockWindow) {
  SummaryRequest request;
  request.trial_ids = {11, 12};
  request.names = {"gpu_util"};
  request.gpu_index = 3;
  request.start = kT0 + absl::Seconds(kStallAt - 30);
  request.end = kT0 + absl::Seconds(kStallAt + 30);
  ASSERT_OK_AND_ASSIGN(SummaryResult r, Summarize(*S().engine, request, Deadline()));
  ASSERT_EQ(r.series.size(), 2u);
  for (const SummarySeries& s : r.series) ExpectMatchesOracle(s, 3);
  const SummarySeries* eleven = Find(r, 11, "", "gpu_util");
  ASSERT_NE(eleven, nullptr);
  EXPECT_EQ(eleven->gpu_count, kAgents);
  EXPECT_EQ(*std::min_element(eleven->data.min.begin(), eleven->data.min.end()), 0);
  request.gpu_index = 2;
  ASSERT_OK_AND_ASSIGN(r, Summarize(*S().engine, request, Deadline()));
  eleven = Find(r, 11, "", "gpu_util");
  ASSERT_NE(eleven, nullptr);
  EXPECT_GT(*std::min_element(eleven->data.min.begin(), eleven->data.min.end()), 0);
}

TEST_F(SummaryTest, BadRequestsNameTheField) {
  auto refused = [](auto change) {
    SummaryRequest request;
    request.trial_ids = {11};
    change(request);
    return Summarize(*S().engine, request, Deadline()).status();
  };
  EXPECT_THAT(refused([](SummaryRequest& r) { r.trial_ids.clear(); }),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("trial_id")));
  EXPECT_THAT(refused([](SummaryRequest& r) { r.trial_ids = {1, 2, 3, 4, 5, 6, 7, 8, 9}; }),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("at most 8")));
  EXPECT_THAT(refused([](SummaryRequest& r) { r.trial_ids = {11, 12, 11}; }),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("trial_id[2]: trial 11 is named twice")));
  EXPECT_THAT(refused([](SummaryRequest& r) { r.trial_ids = {11, -4}; }),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("trial_id[1]")));
  EXPECT_THAT(refused([](SummaryRequest& r) { r.trial_ids = {11, 99}; }),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("99")));
  EXPECT_THAT(refused([](SummaryRequest& r) { r.relative = true; r.start = kT0; }),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("start")));
  EXPECT_THAT(refused([](SummaryRequest& r) { r.offset_end = absl::Hours(1); }),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("offset_end")));
  EXPECT_THAT(refused([](SummaryRequest& r) {
                r.relative = true;
                r.offset_start = absl::Hours(2);
                r.offset_end = absl::Hours(1);
              }),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("offset_end")));
  EXPECT_THAT(refused([](SummaryRequest& r) { r.gpu_index = -1; }),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("gpu_index")));
  EXPECT_THAT(refused([](SummaryRequest& r) { r.max_points = 0; }),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("max_points")));
  EXPECT_THAT(refused([](SummaryRequest& r) { r.agent_ids = {""}; }),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("agent_id[0]")));
  // A trial without data is an empty answer.
  SummaryRequest empty;
  empty.trial_ids = {13};
  ASSERT_OK_AND_ASSIGN(SummaryResult r, Summarize(*S().engine, empty, Deadline()));
  EXPECT_TRUE(r.series.empty());
}

}  // namespace
}  // namespace metrics::query
