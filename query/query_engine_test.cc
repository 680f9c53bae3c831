// The query engine over the real store on PostgreSQL. The property test
// generates series with isolated spikes, gaps, out-of-order and late
// reports and repeated times on two agents and two GPUs, asks many random
// windows at many max_points, and compares every returned bucket (or raw
// point) with the test's own SQL over the raw `metrics` rows.
#include "query/query_engine.h"

#include <algorithm>
#include <map>
#include <cstdint>
#include <random>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "common/status_macros.h"
#include "storage/pg/pg_metric_store.h"
#include "storage/pg/jobs/raw_retention.h"
#include "storage/pg/jobs/sealer.h"
#include "storage/pg/testing/pg_checks.h"
#include "tests/testing/test_database.h"

namespace metrics::query {
namespace {

using ::metrics::test_util::StatusIs;
using ::metrics::test_util::TestDatabase;
using ::testing::HasSubstr;
using storage::BatchOutcome;
using storage::RollupStats;
using storage::MetricBatch;
namespace pgtest = ::metrics::storage::pg::test_util;

constexpr int64_t kSecond = 1000000;
const absl::Time kT0 = absl::FromUnixSeconds(1763800003);  // not aligned
constexpr int64_t kSpan = 3 * 86400;                       // seconds of data

struct Shared {
  std::unique_ptr<TestDatabase> db;
  std::unique_ptr<storage::pg::PgMetricStore> store;
};
Shared& S() {
  static auto* shared = new Shared();
  return *shared;
}

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

absl::Time Deadline() { return absl::Now() + absl::Seconds(60); }

class QueryEngineTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    ASSERT_OK_AND_ASSIGN(S().db, TestDatabase::Create());
    storage::pg::PgMetricStoreOptions options;
    options.database_url = S().db->url();
    options.clock = [] { return kT0 + absl::Hours(24 * 365); };
    S().store = storage::pg::PgMetricStore::Create(options);
    ASSERT_OK(S().store->CreateTrial(7, Deadline()));
    ASSERT_OK(S().store->CreateTrial(8, Deadline()));  // no data

    std::mt19937 random(2024);
    // Each stream's late batches, sent after the seal below: rows waiting
    // for their seal inside sealed windows, which reads add to the stored
    // buckets.
    std::vector<MetricBatch> sent_late;
    for (const char* agent : {"agent-a", "agent-b"}) {
      int64_t sequence = 0;
      // ~40 s apart on average over 3 days, with a 6 h gap; batches of 50
      // reports, shuffled inside, and every 7th batch sent late.
      std::vector<MetricBatch> late;
      int64_t t = 0;
      while (t < kSpan) {
        MetricBatch batch;
        batch.stream_id = absl::StrCat(agent, "/s");
        batch.trial_id = 7;
        batch.agent_id = agent;
        batch.series = {{"cpu_util_simple", "", "percent"},
                        {"gpu_util", "GPU-0", "percent"},
                        {"gpu_util", "GPU-1", "percent"}};
        for (int r = 0; r < 50 && t < kSpan; ++r) {
          t += 1 + random() % 80;
          if (t > 86400 && t < 86400 + 6 * 3600) t = 86400 + 6 * 3600;
          storage::Report report;
          report.time_us = absl::ToUnixMicros(
              kT0 + absl::Seconds(t) + absl::Microseconds(random() % 1000000));
          for (uint32_t s = 0; s < 3; ++s) {
            if (random() % 5 == 0) continue;
            report.series.push_back(s);
            const bool spike = random() % 500 == 0;
            report.values.push_back(spike ? 1e6 + random() % 1000
                                          : (random() % 10000) / 100.0);
          }
          if (report.values.empty()) continue;
          batch.reports.push_back(report);
          if (random() % 20 == 0) {  // the same instant again, other values
            report.values[0] += 0.5;
            batch.reports.push_back(report);
          }
        }
        std::shuffle(batch.reports.begin(), batch.reports.end(), random);
        if (batch.reports.empty()) continue;
        if (late.size() < 3 && random() % 7 == 0) {
          late.push_back(std::move(batch));
          continue;
        }
        batch.sequence = ++sequence;
        Submit(std::move(batch));
      }
      for (MetricBatch& batch : late) {
        batch.sequence = ++sequence;
        sent_late.push_back(std::move(batch));
      }
    }
    // Sealed, as a running metricsd leaves old data (every window is closed).
    storage::pg::SealOptions seal;
    seal.database_url = S().db->url();
    ASSERT_OK(storage::pg::SealClosedWindows(seal).status());
    for (MetricBatch& batch : sent_late) Submit(std::move(batch));
    // A dense agent: 1 Hz for 30 minutes, so short windows hold more raw
    // points than asked for; not sealed.
    for (int64_t b = 0; b < 6; ++b) {
      MetricBatch batch;
      batch.stream_id = "agent-dense/s";
      batch.sequence = b + 1;
      batch.trial_id = 7;
      batch.agent_id = "agent-dense";
      batch.series = {{"cpu_util_simple", "", "percent"}};
      for (int64_t r = 0; r < 300; ++r) {
        batch.reports.push_back({absl::ToUnixMicros(
                                     kT0 + absl::Seconds(3600 + b * 300 + r) +
                                     absl::Microseconds(random() % 1000000)),
                                 {0},
                                 {(random() % 10000) / 100.0},
                                 std::nullopt});
      }
      Submit(std::move(batch));
    }
  }
  static void TearDownTestSuite() {
    S().store->Shutdown(absl::Now() + absl::Seconds(10));
    S().store.reset();
    S().db.reset();
  }

  QueryEngine engine_{&S().store->Reads(), QueryOptions()};
};

// Compares one series' answer with plain SQL over the raw rows.
// Every sample of each series asked for, by (agent, GPU, name), read once
// through the independent SQL decoder: a test checking many windows of the
// same data buckets them here instead of decoding the rows in SQL again for
// each window (60 windows took 40 s that way).
using SampleCache = std::map<std::tuple<std::string, std::string, std::string>,
                             std::vector<std::pair<int64_t, double>>>;

// The buckets RawBucketsOf's SQL makes, from `samples` in storage order.
std::map<int64_t, RollupStats> BucketsOf(const std::vector<std::pair<int64_t, double>>& samples,
                                         int64_t from, int64_t to, int64_t res) {
  std::map<int64_t, RollupStats> buckets;
  for (const auto& [t, v] : samples) {
    if (t < from || t >= to) continue;
    const int64_t start = t - ((t % res) + res) % res;
    auto [it, added] = buckets.try_emplace(start);
    RollupStats& b = it->second;
    if (added) {
      b.min = b.max = v;
      b.first_time_us = t;
      b.first_value = v;
    }
    ++b.count;
    b.sum += v;
    b.min = std::min(b.min, v);
    b.max = std::max(b.max, v);
    b.last_time_us = t;
    b.last_value = v;
  }
  return buckets;
}

void ExpectExact(const QueryResult& result, const SeriesData& data,
                 int max_points, SampleCache* cache = nullptr) {
  const storage::SeriesInfo& s = data.series;
  const std::string what = absl::StrCat(s.agent_id, "/", s.name, "/",
                                        s.gpu_uuid, " res ", data.resolution_us);
  ASSERT_LE(data.bucket_start_us.size(), static_cast<size_t>(max_points))
      << what;
  // The series' samples, from the cache when there is one.
  const std::vector<std::pair<int64_t, double>>* all = nullptr;
  if (cache != nullptr) {
    auto [it, added] = cache->try_emplace({s.agent_id, s.gpu_uuid, s.name});
    if (added) {
      ASSERT_OK_AND_ASSIGN(it->second, pgtest::RawSamplesOf(S().db->url(), 7, s.agent_id,
                                                            s.gpu_uuid, s.name, INT64_MIN,
                                                            INT64_MAX));
    }
    all = &it->second;
  }
  if (data.resolution_us == 0) {
    std::vector<std::pair<int64_t, double>> raw;
    if (all != nullptr) {
      for (const auto& sample : *all) {
        if (sample.first >= result.start_us && sample.first < result.end_us) raw.push_back(sample);
      }
    } else {
      ASSERT_OK_AND_ASSIGN(raw, pgtest::RawSamplesOf(S().db->url(), 7, s.agent_id, s.gpu_uuid,
                                                     s.name, result.start_us, result.end_us));
    }
    ASSERT_EQ(data.bucket_start_us.size(), raw.size()) << what;
    for (size_t i = 0; i < raw.size(); ++i) {
      EXPECT_EQ(data.bucket_start_us[i], raw[i].first) << what;
      EXPECT_EQ(data.min[i], raw[i].second) << what;
      EXPECT_EQ(data.count[i], 1) << what;
    }
    return;
  }
  const int64_t res = data.resolution_us;
  const int64_t from = result.start_us - ((result.start_us % res) + res) % res;
  const int64_t to = result.end_us - 1 - (((result.end_us - 1) % res) + res) % res + res;
  std::map<int64_t, RollupStats> raw;
  if (all != nullptr) {
    raw = BucketsOf(*all, from, to, res);
  } else {
    ASSERT_OK_AND_ASSIGN(raw, pgtest::RawBucketsOf(S().db->url(), 7, s.agent_id, s.gpu_uuid,
                                                   s.name, from, to, res));
  }
  ASSERT_EQ(data.bucket_start_us.size(), raw.size()) << what;
  size_t i = 0;
  for (const auto& [start, b] : raw) {
    EXPECT_EQ(data.bucket_start_us[i], start) << what;
    EXPECT_EQ(data.bucket_start_us[i] % res, 0) << what;
    EXPECT_EQ(data.count[i], b.count) << what << " at " << start;
    EXPECT_NEAR(data.sum[i], b.sum, 1e-9 * std::max(1.0, std::abs(b.sum)));
    EXPECT_EQ(data.min[i], b.min) << what << " at " << start;
    EXPECT_EQ(data.max[i], b.max) << what << " at " << start;
    EXPECT_EQ(data.first_time_us[i], b.first_time_us) << what;
    EXPECT_EQ(data.first_value[i], b.first_value) << what;
    EXPECT_EQ(data.last_time_us[i], b.last_time_us) << what;
    EXPECT_EQ(data.last_value[i], b.last_value) << what;
    EXPECT_DOUBLE_EQ(data.mean[i], data.sum[i] / data.count[i]);
    ++i;
  }
}

TEST_F(QueryEngineTest, EveryBucketOfRandomWindowsEqualsTheRawRows) {
  std::mt19937 random(99);
  std::uniform_real_distribution<double> log_length(0, std::log(4.0 * 86400));
  const int max_points_choices[] = {1, 3, 10, 100, 500, 1000, 2000};
  int stored = 0, raw = 0;
  SampleCache samples;
  for (int q = 0; q < 60; ++q) {
    QueryRequest request;
    request.trial_id = 7;
    const int64_t length = static_cast<int64_t>(std::exp(log_length(random)));
    const int64_t offset = static_cast<int64_t>(random() % (kSpan + 3600)) - 1800;
    request.start = kT0 + absl::Seconds(offset) + absl::Microseconds(random() % 1000000);
    request.end = *request.start + absl::Seconds(std::max<int64_t>(1, length));
    request.max_points = max_points_choices[random() % 7];
    switch (random() % 4) {
      case 0:
        request.names = {"gpu_util"};
        break;
      case 1:
        request.agent_ids = {"agent-b"};
        break;
      case 2:
        request.gpu_uuids = {""};
        break;
      default:
        break;
    }
    ASSERT_OK_AND_ASSIGN(QueryResult result, engine_.Query(request, Deadline()));
    ASSERT_FALSE(result.series.empty());
    for (const SeriesData& data : result.series) {
      ExpectExact(result, data, *request.max_points, &samples);
      if (data.resolution_us == 0) {
        ++raw;
      } else {
        ++stored;
      }
    }
  }
  // The windows exercised both ways of answering.
  EXPECT_GT(stored, 20);
  EXPECT_GT(raw, 5);
}

TEST_F(QueryEngineTest, AWholeRunAnswersFromRollupsAndShowsASpike) {
  QueryRequest request;
  request.trial_id = 7;
  request.names = {"cpu_util_simple"};
  request.agent_ids = {"agent-a"};
  ASSERT_OK_AND_ASSIGN(QueryResult result, engine_.Query(request, Deadline()));
  ASSERT_EQ(result.series.size(), 1u);
  const SeriesData& data = result.series[0];
  // 3 days at 1000 points: 259 s wanted, so 60 s stored buckets merged
  // five to one.
  EXPECT_EQ(data.resolution_us, 300 * kSecond);
  ExpectExact(result, data, 1000);
  ASSERT_OK_AND_ASSIGN(auto all, pgtest::RawSamplesOf(
                                     S().db->url(), 7, "agent-a", "",
                                     "cpu_util_simple", 0, INT64_MAX));
  double highest = 0;
  for (const auto& [t, v] : all) highest = std::max(highest, v);
  EXPECT_EQ(*std::max_element(data.max.begin(), data.max.end()), highest);
  // The default window is the series' whole extent.
  EXPECT_EQ(result.start_us, all.front().first);
}

TEST_F(QueryEngineTest, ZoomingInGivesFinerBucketsDownToRawPoints) {
  QueryRequest request;
  request.trial_id = 7;
  request.names = {"gpu_util"};
  request.agent_ids = {"agent-a"};
  request.gpu_uuids = {"GPU-1"};
  std::vector<int64_t> resolutions;
  for (int64_t seconds : {3 * 86400, 86400, 6 * 3600, 3600}) {
    request.start = kT0 + absl::Seconds(3600);
    request.end = *request.start + absl::Seconds(seconds);
    request.max_points = 500;
    ASSERT_OK_AND_ASSIGN(QueryResult r, engine_.Query(request, Deadline()));
    ASSERT_EQ(r.series.size(), 1u);
    ExpectExact(r, r.series[0], 500);
    resolutions.push_back(r.series[0].resolution_us);
  }
  // 518 s and 173 s wanted: 60 s stored buckets widened to whole
  // multiples; 43 s and 7.2 s are below any stored width: the raw rows,
  // fewer than 500 points here, as they are.
  EXPECT_EQ(resolutions, (std::vector<int64_t>{540 * kSecond, 180 * kSecond, 0, 0}));
}

TEST_F(QueryEngineTest, ADenseShortWindowIsBucketedFromRawRows) {
  QueryRequest request;
  request.trial_id = 7;
  request.agent_ids = {"agent-dense"};
  request.start = kT0 + absl::Seconds(3700);
  request.end = kT0 + absl::Seconds(3700 + 1200);
  request.max_points = 200;  // 1200 samples, 6 s wanted: below stored widths
  ASSERT_OK_AND_ASSIGN(QueryResult result, engine_.Query(request, Deadline()));
  ASSERT_EQ(result.series.size(), 1u);
  // 6 s wanted; a few milliseconds more so the aligned buckets fit in 200.
  EXPECT_GE(result.series[0].resolution_us, 6 * kSecond);
  EXPECT_LT(result.series[0].resolution_us, 6100000);
  EXPECT_LE(result.series[0].count.size(), 200u);
  ExpectExact(result, result.series[0], 200);
  request.max_points = 2000;  // now they fit: raw points
  ASSERT_OK_AND_ASSIGN(result, engine_.Query(request, Deadline()));
  EXPECT_EQ(result.series[0].resolution_us, 0);
  EXPECT_EQ(result.series[0].count.size(), 1200u);
  ExpectExact(result, result.series[0], 2000);
}

// However dense the data, a query reads a bounded number of raw rows: past
// the limit it answers from the finest rollup (1 min), still exact.
TEST_F(QueryEngineTest, TooDenseForRawRowsAnswersFromTheFinestRollup) {
  QueryOptions options;
  options.max_raw_reports_per_agent = 500;
  QueryEngine engine(&S().store->Reads(), options);
  QueryRequest request;
  request.trial_id = 7;
  request.agent_ids = {"agent-dense"};
  request.start = kT0 + absl::Seconds(3700);
  request.end = kT0 + absl::Seconds(3700 + 1200);
  request.max_points = 200;  // 6 s wanted, from 1200 raw reports
  ASSERT_OK_AND_ASSIGN(QueryResult result, engine.Query(request, Deadline()));
  ASSERT_EQ(result.series.size(), 1u);
  EXPECT_EQ(result.series[0].resolution_us, 60 * kSecond);
  EXPECT_LE(result.series[0].count.size(), 200u);
  ExpectExact(result, result.series[0], 200);
  // The whole run, so the series' extents are known: the same, without
  // trying the raw rows first.
  request.start.reset();
  request.end.reset();
  ASSERT_OK_AND_ASSIGN(result, engine.Query(request, Deadline()));
  EXPECT_EQ(result.series[0].resolution_us, 60 * kSecond);
  ExpectExact(result, result.series[0], 200);
  request.start = kT0 + absl::Seconds(3700);
  request.end = kT0 + absl::Seconds(3700 + 1200);
  // Held to raw points (a follow at its first resolution): refused.
  request.resolution_us = 0;
  EXPECT_THAT(engine.Query(request, Deadline()),
              StatusIs(absl::StatusCode::kResourceExhausted,
                       HasSubstr("more than 500 reports")));
}

TEST_F(QueryEngineTest, AWindowOfThousandsOfStoredBucketsIsExact) {
  // Three days at 1 min: thousands of stored buckets per agent, read
  // through the store's cursor a page at a time.
  QueryRequest request;
  request.trial_id = 7;
  request.agent_ids = {"agent-a", "agent-b"};
  request.resolution_us = 60 * kSecond;
  ASSERT_OK_AND_ASSIGN(QueryResult result, engine_.Query(request, Deadline()));
  ASSERT_EQ(result.series.size(), 6u);
  for (const SeriesData& data : result.series) {
    EXPECT_EQ(data.resolution_us, 60 * kSecond);
    EXPECT_GT(data.count.size(), 3000u);
    ExpectExact(result, data, 100000);
  }
}

// Chart reads whose rollup reads start over once after some rows, as a
// read does when its connection is lost and the transaction runs again.
class RestartingReads : public storage::ChartReads {
 public:
  explicit RestartingReads(storage::ChartReads* real) : real_(real) {}
  absl::Status ReadRollups(int32_t trial_id,
                           const std::vector<std::string>& agents, int width_s,
                           const std::vector<int64_t>& series_ids,
                           int64_t from_us, int64_t to_us, absl::Time deadline,
                           storage::RollupSink& sink) override {
    // The first attempt's rows are taken, then the read runs again whole.
    RETURN_IF_ERROR(real_->ReadRollups(trial_id, agents, width_s, series_ids,
                                       from_us, to_us, deadline, sink));
    return real_->ReadRollups(trial_id, agents, width_s, series_ids, from_us,
                              to_us, deadline, sink);
  }
  absl::StatusOr<std::vector<storage::SeriesInfo>> ListSeries(
      int32_t trial_id, bool extents, absl::Time deadline) override {
    return real_->ListSeries(trial_id, extents, deadline);
  }
  absl::StatusOr<std::vector<storage::Trial>> ListTrials(
      const storage::TrialListFilter& filter, absl::Time deadline) override {
    return real_->ListTrials(filter, deadline);
  }
  absl::StatusOr<std::vector<std::vector<storage::Sample>>> ReadRawSamples(
      int32_t trial_id, const std::vector<storage::SeriesInfo>& series,
      int64_t from_us, int64_t to_us, int64_t max_reports,
      absl::Time deadline) override {
    return real_->ReadRawSamples(trial_id, series, from_us, to_us, max_reports,
                                 deadline);
  }
  absl::Status StreamRawSamples(int32_t trial_id,
                                const std::vector<storage::SeriesInfo>& series,
                                int64_t from_us, int64_t to_us, absl::Time deadline,
                                storage::RawSampleSink& sink) override {
    return real_->StreamRawSamples(trial_id, series, from_us, to_us, deadline, sink);
  }

 private:
  storage::ChartReads* const real_;
};

TEST_F(QueryEngineTest, ARollupReadThatStartsOverCountsEachBucketOnce) {
  RestartingReads restarting(&S().store->Reads());
  QueryEngine engine(&restarting, QueryOptions());
  QueryRequest request;
  request.trial_id = 7;
  request.agent_ids = {"agent-a"};
  request.max_points = 300;
  ASSERT_OK_AND_ASSIGN(QueryResult result, engine.Query(request, Deadline()));
  ASSERT_EQ(result.series.size(), 3u);
  for (const SeriesData& data : result.series) {
    EXPECT_GT(data.resolution_us, 0);
    ExpectExact(result, data, 300);
  }
}

TEST_F(QueryEngineTest, ListSeriesGivesExtentAndCountWithoutRawRows) {
  ASSERT_OK_AND_ASSIGN(std::vector<storage::SeriesInfo> series,
                       engine_.ListSeries(7, Deadline()));
  ASSERT_EQ(series.size(), 7u);
  for (const storage::SeriesInfo& s : series) {
    ASSERT_OK_AND_ASSIGN(auto raw, pgtest::RawSamplesOf(
                                       S().db->url(), 7, s.agent_id, s.gpu_uuid,
                                       s.name, 0, INT64_MAX));
    EXPECT_EQ(s.sample_count, static_cast<int64_t>(raw.size()));
    EXPECT_EQ(s.unit, "percent");
    ASSERT_TRUE(s.first_time_us.has_value());
    int64_t first = INT64_MAX, last = INT64_MIN;
    for (const auto& [t, v] : raw) {
      first = std::min(first, t);
      last = std::max(last, t);
    }
    EXPECT_EQ(*s.first_time_us, first);
    EXPECT_EQ(*s.last_time_us, last);
  }
  ASSERT_OK_AND_ASSIGN(auto none, engine_.ListSeries(8, Deadline()));
  EXPECT_TRUE(none.empty());
}

// GPUs are numbered in the order their agent first reported them (NVML's),
// not by UUID, and every series of one GPU has its number.
TEST_F(QueryEngineTest, ListSeriesNumbersGpusInTheOrderTheAgentReportedThem) {
  ASSERT_OK(S().store->CreateTrial(9, Deadline()));
  MetricBatch batch;
  batch.stream_id = "agent-g/s";
  batch.sequence = 1;
  batch.trial_id = 9;
  batch.agent_id = "agent-g";
  batch.series = {{"gpu_util", "GPU-zz", "percent"},
                  {"gpu_util", "GPU-aa", "percent"},
                  {"cpu_util_simple", "", "percent"},
                  {"gpu_free_memory", "GPU-aa", "bytes"},
                  {"gpu_free_memory", "GPU-zz", "bytes"}};
  storage::Report report;
  report.time_us = absl::ToUnixMicros(kT0);
  report.series = {0, 1, 2, 3, 4};
  report.values = {1, 2, 3, 4, 5};
  batch.reports.push_back(report);
  Submit(std::move(batch));
  ASSERT_OK_AND_ASSIGN(std::vector<storage::SeriesInfo> series,
                       engine_.ListSeries(9, Deadline()));
  std::map<std::string, int> index;
  for (const storage::SeriesInfo& s : series) {
    index[absl::StrCat(s.name, "/", s.gpu_uuid)] = s.gpu_index;
  }
  EXPECT_THAT(index, ::testing::UnorderedElementsAre(
                         ::testing::Pair("gpu_util/GPU-zz", 0),
                         ::testing::Pair("gpu_util/GPU-aa", 1),
                         ::testing::Pair("cpu_util_simple/", 0),
                         ::testing::Pair("gpu_free_memory/GPU-aa", 1),
                         ::testing::Pair("gpu_free_memory/GPU-zz", 0)));
}

TEST_F(QueryEngineTest, BadRequestsAreRefusedAndEmptyAnswersAreNotErrors) {
  QueryRequest request;
  request.trial_id = 7;
  request.start = kT0 + absl::Hours(2);
  request.end = kT0 + absl::Hours(1);
  EXPECT_THAT(engine_.Query(request, Deadline()),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("start: 2025-11-22T10:26:43Z is not before "
                                 "end 2025-11-22T09:26:43Z")));
  request.end.reset();
  for (int bad : {0, -5, 10001}) {
    request.max_points = bad;
    EXPECT_THAT(engine_.Query(request, Deadline()),
                StatusIs(absl::StatusCode::kInvalidArgument,
                         HasSubstr(absl::StrCat("max_points: ", bad,
                                                " is not between 1 and 10000"))));
  }
  request.max_points.reset();
  request.names = {"cpu", ""};
  EXPECT_THAT(engine_.Query(request, Deadline()),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("name[1]: must not be empty")));
  request.names.clear();
  request.trial_id = 404;
  EXPECT_THAT(engine_.Query(request, Deadline()),
              StatusIs(absl::StatusCode::kNotFound));

  // Empty answers: a trial without data, a selection matching nothing, a
  // window before the data.
  request.trial_id = 8;
  ASSERT_OK_AND_ASSIGN(QueryResult empty, engine_.Query(request, Deadline()));
  EXPECT_TRUE(empty.series.empty());
  request.trial_id = 7;
  request.names = {"no_such_series"};
  ASSERT_OK_AND_ASSIGN(empty, engine_.Query(request, Deadline()));
  EXPECT_TRUE(empty.series.empty());
  request.names.clear();
  request.start = kT0 - absl::Hours(48);
  request.end = kT0 - absl::Hours(47);
  ASSERT_OK_AND_ASSIGN(empty, engine_.Query(request, Deadline()));
  ASSERT_FALSE(empty.series.empty());
  for (const SeriesData& d : empty.series) EXPECT_TRUE(d.count.empty());
}

// Raw-data retention is database-wide: a database of its own.
TEST(RawRetentionQueryTest, AnExpiredWindowIsChartedFromRollupsAndSaysSo) {
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<TestDatabase> db, TestDatabase::Create());
  storage::pg::PgMetricStoreOptions options;
  options.database_url = db->url();
  options.clock = [] { return kT0 + absl::Hours(24 * 365); };
  std::unique_ptr<storage::pg::PgMetricStore> store =
      storage::pg::PgMetricStore::Create(options);
  ASSERT_OK(store->CreateTrial(1, Deadline()));
  // Two hours at 1 Hz, with a spike a minute.
  for (int64_t seq = 0; seq < 24; ++seq) {
    MetricBatch batch;
    batch.stream_id = "s";
    batch.sequence = seq + 1;
    batch.trial_id = 1;
    batch.agent_id = "agent-a";
    batch.series = {{"gpu_util", "GPU-0", "percent"}};
    for (int64_t i = seq * 300; i < (seq + 1) * 300; ++i) {
      batch.reports.push_back({absl::ToUnixMicros(kT0) + i * kSecond + 1234,
                               {0},
                               {i % 60 == 7 ? 100.0 : 20.0 + (i % 13) / 4.0},
                               std::nullopt});
    }
    absl::Notification done;
    ASSERT_OK(store->SubmitBatch(std::move(batch), [&](BatchOutcome o) {
      EXPECT_EQ(o.kind, BatchOutcome::Kind::kStored) << o.status;
      done.Notify();
    }));
    ASSERT_TRUE(done.WaitForNotificationWithTimeout(absl::Seconds(60)));
  }
  QueryEngine engine(&store->Reads(), QueryOptions{});
  QueryRequest five_minutes;
  five_minutes.trial_id = 1;
  five_minutes.start = kT0 + absl::Minutes(10);
  five_minutes.end = kT0 + absl::Minutes(15);
  ASSERT_OK_AND_ASSIGN(QueryResult raw, engine.Query(five_minutes, Deadline()));
  ASSERT_EQ(raw.series.size(), 1u);
  EXPECT_EQ(raw.series[0].resolution_us, 0);  // raw points
  EXPECT_FALSE(raw.raw_expired);
  QueryRequest at_1min = five_minutes;
  at_1min.resolution_us = 60 * kSecond;
  ASSERT_OK_AND_ASSIGN(QueryResult buckets, engine.Query(at_1min, Deadline()));

  storage::pg::RetentionOptions retention;
  retention.database_url = db->url();
  retention.raw_retention = absl::Hours(1);
  retention.now = kT0 + absl::Hours(2);
  ASSERT_OK_AND_ASSIGN(storage::pg::RetentionSummary removed,
                       storage::pg::ApplyRawRetention(retention));
  // The run sealed the windows first (into the rollups), then removed those
  // wholly before the horizon.
  const int64_t window = 600 * kSecond;
  EXPECT_EQ(removed.rows, (storage::AlignDown(absl::ToUnixMicros(kT0 + absl::Hours(1)), window) -
                           storage::AlignDown(absl::ToUnixMicros(kT0), window)) /
                              window);

  ASSERT_OK_AND_ASSIGN(QueryResult expired,
                       engine.Query(five_minutes, Deadline()));
  EXPECT_TRUE(expired.raw_expired);
  ASSERT_EQ(expired.series.size(), 1u);
  const SeriesData& e = expired.series[0];
  const SeriesData& b = buckets.series[0];
  EXPECT_EQ(e.resolution_us, 60 * kSecond);
  EXPECT_EQ(e.bucket_start_us, b.bucket_start_us);
  EXPECT_EQ(e.count, b.count);
  EXPECT_EQ(e.min, b.min);
  EXPECT_EQ(e.max, b.max);  // the spikes are still there
  EXPECT_EQ(e.mean, b.mean);
  EXPECT_EQ(e.last_time_us, b.last_time_us);
  EXPECT_EQ(*std::max_element(e.max.begin(), e.max.end()), 100.0);

  // After the horizon, raw points as before.
  QueryRequest recent = five_minutes;
  recent.start = kT0 + absl::Minutes(70);
  recent.end = kT0 + absl::Minutes(75);
  ASSERT_OK_AND_ASSIGN(QueryResult fresh, engine.Query(recent, Deadline()));
  EXPECT_FALSE(fresh.raw_expired);
  EXPECT_EQ(fresh.series[0].resolution_us, 0);
  EXPECT_EQ(fresh.series[0].count.size(), 300u);
  store->Shutdown(absl::Now() + absl::Seconds(5));
}

}  // namespace
}  // namespace metrics::query
