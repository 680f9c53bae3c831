// Streamed raw reads (ChartReads::StreamRawSamples, what exports read) on a
// real PostgreSQL: every sample of the window once, in time order across
// agents and pages, each row's values in the list's order; filters by
// series and window; a sink that stops the read; an expired window.
#include <pqxx/connection>
#include <pqxx/nontransaction>

#include <algorithm>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "common/testing/status_matchers.h"
#include "common/testing/test_time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "storage/pg/pg_metric_store.h"
#include "tests/testing/test_database.h"

namespace metrics::storage::pg {
namespace {

using ::metrics::test_util::StatusIs;
using ::metrics::test_util::TestDatabase;

using ::metrics::test_util::kT0;

// (series index, time, value), as a sink took them.
using Taken = std::tuple<size_t, int64_t, double>;

class CollectingSink : public RawSampleSink {
 public:
  explicit CollectingSink(size_t stop_after = SIZE_MAX) : stop_after_(stop_after) {}
  absl::Status Take(size_t series, const Sample& sample) override {
    if (taken.size() == stop_after_) return absl::CancelledError("the client left");
    taken.emplace_back(series, sample.time_us, sample.value);
    return absl::OkStatus();
  }
  std::vector<Taken> taken;

 private:
  const size_t stop_after_;
};

class StreamRawSamplesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_OK_AND_ASSIGN(db_, TestDatabase::Create());
    PgMetricStoreOptions options;
    options.database_url = db_->url();
    options.clock = [] { return kT0 + absl::Hours(24); };
    store_ = PgMetricStore::Create(std::move(options));
    ASSERT_OK(store_->CreateTrial(7, Deadline()).status());
  }
  void TearDown() override {
    if (store_ != nullptr) store_->Shutdown(Deadline());
  }

  static absl::Time Deadline() { return absl::Now() + absl::Seconds(30); }

  void Submit(MetricBatch batch) {
    absl::Notification done;
    BatchOutcome outcome;
    ASSERT_OK(store_->SubmitBatch(std::move(batch), [&](BatchOutcome o) {
      outcome = std::move(o);
      done.Notify();
    }));
    ASSERT_TRUE(done.WaitForNotificationWithTimeout(absl::Seconds(60)));
    ASSERT_EQ(outcome.kind, BatchOutcome::Kind::kStored) << outcome.status;
  }

  // `agent`'s reports at kT0 + step_ms * k for k in [0, count): cpu
  // (agent's value k + offset) and GPU-2, GPU-1 (declared in that order).
  void SubmitReports(const std::string& agent, int64_t sequence, int step_ms, int count,
                     double offset) {
    MetricBatch batch;
    batch.stream_id = agent;
    batch.sequence = sequence;
    batch.trial_id = 7;
    batch.agent_id = agent;
    batch.series = {{"cpu_util_simple", "", "percent"},
                    {"gpu_util", "GPU-2", "percent"},
                    {"gpu_util", "GPU-1", "percent"}};
    for (int k = 0; k < count; ++k) {
      batch.reports.push_back({absl::ToUnixMicros(kT0 + absl::Milliseconds(step_ms * k)),
                               {0, 1, 2},
                               {k + offset, 1000 + k + offset, 2000 + k + offset},
                               std::nullopt});
    }
    Submit(std::move(batch));
  }

  std::unique_ptr<TestDatabase> db_;
  std::unique_ptr<PgMetricStore> store_;
};

TEST_F(StreamRawSamplesTest, EverySampleOnceInTimeOrderAcrossAgentsAndPages) {
  // 5000 reports each (several pages of rows), every 6th ms at the same
  // time on both agents; agent-a gets a second report at 3 ms, after.
  SubmitReports("agent-b", 1, 3, 5000, 0.5);
  SubmitReports("agent-a", 1, 2, 5000, 0.25);
  SubmitReports("agent-a", 2, 3, 2, 0.125);  // times 0 and 3 ms, stored later
  ASSERT_OK_AND_ASSIGN(std::vector<SeriesInfo> series,
                       store_->Reads().ListSeries(7, false, Deadline()));
  ASSERT_EQ(series.size(), 6u);

  // Expected: by time, then agent, then ingest order, then list order.
  struct Row {
    int64_t t;
    std::string agent;
    int order;
    std::vector<double> values;  // cpu, GPU-1, GPU-2: ListSeries' order
  };
  std::vector<Row> rows;
  const auto add = [&](const std::string& agent, int order_base, int step_ms, int count,
                       double offset) {
    for (int k = 0; k < count; ++k) {
      rows.push_back({absl::ToUnixMicros(kT0 + absl::Milliseconds(step_ms * k)), agent,
                      order_base + k,
                      {k + offset, 2000 + k + offset, 1000 + k + offset}});
    }
  };
  add("agent-b", 0, 3, 5000, 0.5);
  add("agent-a", 0, 2, 5000, 0.25);
  add("agent-a", 10000, 3, 2, 0.125);
  std::stable_sort(rows.begin(), rows.end(), [](const Row& a, const Row& b) {
    return std::tie(a.t, a.agent, a.order) < std::tie(b.t, b.agent, b.order);
  });
  std::vector<Taken> expected;
  for (const Row& r : rows) {
    const size_t first = r.agent == "agent-a" ? 0 : 3;
    for (size_t i = 0; i < 3; ++i) expected.emplace_back(first + i, r.t, r.values[i]);
  }

  CollectingSink all;
  ASSERT_OK(store_->Reads().StreamRawSamples(7, series, absl::ToUnixMicros(kT0),
                                             absl::ToUnixMicros(kT0 + absl::Hours(1)),
                                             Deadline(), all));
  ASSERT_EQ(all.taken.size(), expected.size());
  for (size_t i = 0; i < expected.size(); ++i) {
    ASSERT_EQ(all.taken[i], expected[i]) << "sample " << i;
  }

  // One series of one agent, in a window: [3 s, 6 s).
  const std::vector<SeriesInfo> one = {series[5]};  // agent-b, GPU-2
  ASSERT_EQ(one[0].gpu_uuid, "GPU-2");
  CollectingSink some;
  ASSERT_OK(store_->Reads().StreamRawSamples(
      7, one, absl::ToUnixMicros(kT0 + absl::Seconds(3)),
      absl::ToUnixMicros(kT0 + absl::Seconds(6)), Deadline(), some));
  std::vector<Taken> window;
  for (const Taken& t : expected) {
    if (std::get<0>(t) == 5 && std::get<1>(t) >= absl::ToUnixMicros(kT0 + absl::Seconds(3)) &&
        std::get<1>(t) < absl::ToUnixMicros(kT0 + absl::Seconds(6))) {
      window.emplace_back(0, std::get<1>(t), std::get<2>(t));
    }
  }
  EXPECT_EQ(window.size(), 1000u);
  EXPECT_EQ(some.taken, window);
}

TEST_F(StreamRawSamplesTest, ASinkThatStopsEndsTheReadWithItsError) {
  SubmitReports("agent-a", 1, 2, 3000, 0);
  ASSERT_OK_AND_ASSIGN(std::vector<SeriesInfo> series,
                       store_->Reads().ListSeries(7, false, Deadline()));
  CollectingSink stops(10);
  EXPECT_THAT(store_->Reads().StreamRawSamples(7, series, absl::ToUnixMicros(kT0),
                                               absl::ToUnixMicros(kT0 + absl::Hours(1)),
                                               Deadline(), stops),
              StatusIs(absl::StatusCode::kCancelled));
  EXPECT_EQ(stops.taken.size(), 10u);
}

TEST_F(StreamRawSamplesTest, AnExpiredWindowIsOutOfRangeWithNothingTaken) {
  SubmitReports("agent-a", 1, 1000, 10, 0);
  ASSERT_OK_AND_ASSIGN(std::vector<SeriesInfo> series,
                       store_->Reads().ListSeries(7, false, Deadline()));
  {
    pqxx::connection conn(db_->url());
    pqxx::nontransaction tx(conn);
    tx.exec(absl::StrCat("UPDATE raw_retention SET horizon = to_timestamp(",
                         absl::ToUnixSeconds(kT0 + absl::Seconds(5)), ")"));
    if (tx.exec("SELECT 1 FROM raw_retention").empty()) {
      tx.exec(absl::StrCat("INSERT INTO raw_retention (horizon) VALUES (to_timestamp(",
                           absl::ToUnixSeconds(kT0 + absl::Seconds(5)), "))"));
    }
  }
  CollectingSink expired;
  EXPECT_THAT(store_->Reads().StreamRawSamples(7, series, absl::ToUnixMicros(kT0),
                                               absl::ToUnixMicros(kT0 + absl::Hours(1)),
                                               Deadline(), expired),
              StatusIs(absl::StatusCode::kOutOfRange));
  EXPECT_TRUE(expired.taken.empty());
  CollectingSink kept;
  ASSERT_OK(store_->Reads().StreamRawSamples(7, series,
                                             absl::ToUnixMicros(kT0 + absl::Seconds(5)),
                                             absl::ToUnixMicros(kT0 + absl::Hours(1)),
                                             Deadline(), kept));
  EXPECT_EQ(kept.taken.size(), 5u * series.size());
}

}  // namespace
}  // namespace metrics::storage::pg
