// Followers of the same query share its rounds (query/follow_hub.h), through gRPC
// against the real server and PostgreSQL: 50 followers of one trial cost
// the store what one follower costs per change, and each of them receives
// what a lone follower of an identical trial receives.
#include <grpcpp/client_context.h>

#include <atomic>
#include <memory>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "common/testing/eventually.h"
#include "common/testing/status_matchers.h"
#include "gtest/gtest.h"
#include "proto/metrics/v1/ingest.grpc.pb.h"
#include "proto/metrics/v1/query.grpc.pb.h"
#include "storage/metric_store_wrapper.h"
#include "tests/testing/test_server.h"
#include "tests/testing/trials.h"

namespace metrics::server {
namespace {

using ::metrics::test_util::Eventually;
using ::metrics::test_util::TestServer;

const int64_t kStart = absl::ToUnixSeconds(absl::Now()) - 600;

// Counts the chart reads a follow makes (PrimaryReads).
class CountingReads : public storage::ChartReads {
 public:
  explicit CountingReads(storage::ChartReads& target) : target_(target) {}

  absl::StatusOr<std::vector<storage::Trial>> ListTrials(
      const storage::TrialListFilter& filter, absl::Time deadline) override {
    ++reads;
    return target_.ListTrials(filter, deadline);
  }
  absl::StatusOr<std::vector<storage::SeriesInfo>> ListSeries(
      int32_t trial_id, bool extents, absl::Time deadline) override {
    ++reads;
    return target_.ListSeries(trial_id, extents, deadline);
  }
  absl::Status ReadRollups(int32_t trial_id,
                           const std::vector<std::string>& agents, int width_s,
                           const std::vector<int64_t>& series_ids,
                           int64_t from_us, int64_t to_us, absl::Time deadline,
                           storage::RollupSink& sink) override {
    ++reads;
    return target_.ReadRollups(trial_id, agents, width_s, series_ids, from_us,
                               to_us, deadline, sink);
  }
  absl::StatusOr<std::vector<std::vector<storage::Sample>>> ReadRawSamples(
      int32_t trial_id, const std::vector<storage::SeriesInfo>& series,
      int64_t from_us, int64_t to_us, int64_t max_reports,
      absl::Time deadline) override {
    ++reads;
    return target_.ReadRawSamples(trial_id, series, from_us, to_us,
                                  max_reports, deadline);
  }
  absl::Status StreamRawSamples(int32_t trial_id,
                                const std::vector<storage::SeriesInfo>& series,
                                int64_t from_us, int64_t to_us,
                                absl::Time deadline,
                                storage::RawSampleSink& sink) override {
    ++reads;
    return target_.StreamRawSamples(trial_id, series, from_us, to_us, deadline,
                                    sink);
  }

  std::atomic<int> reads{0};

 private:
  storage::ChartReads& target_;
};

class CountingStore : public storage::MetricStoreWrapper {
 public:
  explicit CountingStore(std::unique_ptr<storage::MetricStore> target)
      : MetricStoreWrapper(std::move(target)),
        primary_(MetricStoreWrapper::PrimaryReads()) {}

  absl::StatusOr<storage::Trial> GetTrial(int32_t id,
                                          absl::Time deadline) override {
    {
      absl::MutexLock lock(&gate_mu_);
      gate_mu_.Await(absl::Condition(
          +[](bool* closed) { return !*closed; }, &gate_closed_));
    }
    ++trial_lookups;
    return MetricStoreWrapper::GetTrial(id, deadline);
  }
  // While closed, trial lookups (a round's first read) wait.
  void CloseGate(bool closed) {
    absl::MutexLock lock(&gate_mu_);
    gate_closed_ = closed;
  }
  storage::ChartReads& PrimaryReads() override { return primary_; }

  int reads() const { return primary_.reads + trial_lookups; }
  void Reset() {
    primary_.reads = 0;
    trial_lookups = 0;
  }

  std::atomic<int> trial_lookups{0};

 private:
  CountingReads primary_;
  absl::Mutex gate_mu_;
  bool gate_closed_ ABSL_GUARDED_BY(gate_mu_) = false;
};

// One FollowSeries call read on its own thread: every point it is sent, in
// order, as "time=value" of each series' raw points or buckets.
class Follower {
 public:
  Follower(v1::QueryService::Stub& stub, int32_t trial,
           const std::string& agent = "") {
    v1::QuerySeriesRequest request;
    request.set_trial_id(trial);
    request.add_name("cpu_util_simple");
    if (!agent.empty()) request.add_agent_id(agent);
    request.mutable_start()->set_seconds(kStart);
    reader_ = stub.FollowSeries(&context_, request);
    thread_ = std::thread([this] {
      v1::QuerySeriesResponse message;
      while (reader_->Read(&message)) {
        absl::MutexLock lock(&mu_);
        ++messages_;
        for (const v1::SeriesBuckets& s : message.series()) {
          for (int i = 0; i < s.count_size(); ++i) {
            points_.push_back(absl::StrCat(s.resolution_us(), ":",
                                           s.bucket_start_us(i), "=",
                                           s.max(i), "/", s.count(i)));
          }
        }
      }
    });
  }
  ~Follower() {
    context_.TryCancel();
    thread_.join();
    (void)reader_->Finish();
  }

  int messages() const {
    absl::MutexLock lock(&mu_);
    return messages_;
  }
  std::vector<std::string> points() const {
    absl::MutexLock lock(&mu_);
    return points_;
  }

 private:
  grpc::ClientContext context_;
  std::unique_ptr<grpc::ClientReader<v1::QuerySeriesResponse>> reader_;
  std::thread thread_;
  mutable absl::Mutex mu_;
  int messages_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<std::string> points_ ABSL_GUARDED_BY(mu_);
};

class FollowSharingTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_OK_AND_ASSIGN(
        server_,
        TestServer::Start({}, [this](std::unique_ptr<storage::MetricStore> s) {
          auto counting = std::make_unique<CountingStore>(std::move(s));
          store_ = counting.get();
          return counting;
        }));
    ingest_ = v1::IngestService::NewStub(server_->Channel());
    query_ = v1::QueryService::NewStub(server_->Channel());
    for (int32_t id : {1, 2}) {
      ASSERT_OK(test_util::CreateTrial(server_->Channel(), id));
    }
  }

  void Report(int32_t trial, int64_t seconds, double value,
              const std::string& agent = "agent-a") {
    v1::ReportSystemMetricsRequest request;
    v1::SystemMetricsBatch* batch = request.mutable_batch();
    batch->set_trial_id(trial);
    batch->set_agent_id(agent);
    v1::SeriesDeclaration* s = batch->add_series();
    s->set_name("cpu_util_simple");
    s->set_unit("percent");
    v1::SystemMetricsReport* r = batch->add_reports();
    r->mutable_time()->set_seconds(seconds);
    r->add_series(0);
    r->add_values(value);
    grpc::ClientContext context;
    v1::ReportSystemMetricsResponse response;
    grpc::Status status =
        ingest_->ReportSystemMetrics(&context, request, &response);
    ASSERT_TRUE(status.ok()) << status.error_message();
  }

  std::unique_ptr<TestServer> server_;
  CountingStore* store_ = nullptr;
  std::unique_ptr<v1::IngestService::Stub> ingest_;
  std::unique_ptr<v1::QueryService::Stub> query_;
};

TEST_F(FollowSharingTest, FiftyFollowersCostOneFollowersReadsAndSeeTheSame) {
  constexpr int kFollowers = 50;
  constexpr int kChanges = 6;
  for (int32_t trial : {1, 2}) Report(trial, kStart + 1, 1);

  Follower lone(*query_, 1);
  std::vector<std::unique_ptr<Follower>> many;
  for (int i = 0; i < kFollowers; ++i) {
    many.push_back(std::make_unique<Follower>(*query_, 2));
  }
  auto all_have = [](const std::vector<Follower*>& followers, size_t points) {
    for (Follower* f : followers) {
      if (f->points().size() < points) return false;
    }
    return true;
  };
  std::vector<Follower*> many_pointers;
  for (auto& f : many) many_pointers.push_back(f.get());
  ASSERT_TRUE(Eventually([&] { return all_have({&lone}, 1); },
                         absl::Seconds(30), absl::Milliseconds(10)));
  ASSERT_TRUE(Eventually([&] { return all_have(many_pointers, 1); },
                         absl::Seconds(30), absl::Milliseconds(10)));

  // The same changes to each trial, one at a time, each awaited by its
  // followers before the next: first the lone follower's, then the fifty's.
  int reads[2];
  int lookups[2];
  for (int32_t trial : {1, 2}) {
    const std::vector<Follower*> followers =
        trial == 1 ? std::vector<Follower*>{&lone} : many_pointers;
    store_->Reset();
    for (int k = 1; k <= kChanges; ++k) {
      Report(trial, kStart + 1 + 10 * k, 10 * k);
      ASSERT_TRUE(Eventually([&] { return all_have(followers, 1 + k); },
                             absl::Seconds(30), absl::Milliseconds(5)))
          << "trial " << trial << ", change " << k;
    }
    reads[trial - 1] = store_->reads();
    lookups[trial - 1] = store_->trial_lookups;
  }
  // One round per change for the fifty, as for one: a lookup of the trial
  // and its query's reads.
  EXPECT_GT(reads[0], 0);
  EXPECT_LE(lookups[1], kChanges + 1);
  // (one round's worth of slack, for a notification that came twice)
  EXPECT_LE(reads[1], reads[0] + reads[0] / kChanges)
      << "store reads for 50 followers; for one: " << reads[0];
  for (const auto& f : many) EXPECT_EQ(f->points(), lone.points());
}

TEST_F(FollowSharingTest, AFollowerOfOneAgentHearsOnlyItsCommits) {
  // Agent ids may hold spaces, and one may begin with another's id.
  Report(1, kStart + 1, 1, "node 1 gpu box");
  Report(1, kStart + 1, 1, "node 1");
  Follower follower(*query_, 1, "node 1 gpu box");
  ASSERT_TRUE(Eventually([&] { return follower.points().size() == 1; },
                         absl::Seconds(30), absl::Milliseconds(10)));
  // The first reports' notifications may come after the follower's first
  // answer, and start a round of their own: counting starts once a quiet
  // while has passed.
  ASSERT_TRUE(Eventually(
      [&] {
        store_->Reset();
        absl::SleepFor(absl::Milliseconds(300));
        return store_->reads() == 0;
      },
      absl::Seconds(30), absl::Milliseconds(10)));
  // Another agent's commits start no round: nothing is read.
  for (int k = 1; k <= 5; ++k) Report(1, kStart + 1 + k, 10 * k, "node 1");
  absl::SleepFor(absl::Milliseconds(500));
  EXPECT_EQ(store_->reads(), 0);
  // Its own agent's commit does.
  Report(1, kStart + 10, 99, "node 1 gpu box");
  ASSERT_TRUE(Eventually([&] { return follower.points().size() == 2; },
                         absl::Seconds(30), absl::Milliseconds(10)));
  EXPECT_EQ(follower.points().back(), "0:" + std::to_string((kStart + 10) * 1000000) + "=99/1");
  EXPECT_GT(store_->reads(), 0);
}

TEST_F(FollowSharingTest, FollowersJoiningTogetherShareTheirFirstQuery) {
  constexpr int kFollowers = 50;
  for (int32_t trial : {1, 2}) Report(trial, kStart + 1, 1);
  store_->Reset();
  {
    Follower lone(*query_, 1);
    ASSERT_TRUE(Eventually([&] { return lone.points().size() == 1; },
                           absl::Seconds(30), absl::Milliseconds(10)));
  }
  const int lone_reads = store_->reads();
  store_->Reset();
  // They join while a round waits (at most two rounds take them: the one
  // waiting and the next), as a burst of viewers joins a busy trial.
  store_->CloseGate(true);
  std::vector<std::unique_ptr<Follower>> many;
  for (int i = 0; i < kFollowers; ++i) {
    many.push_back(std::make_unique<Follower>(*query_, 2));
  }
  absl::SleepFor(absl::Seconds(1));
  store_->CloseGate(false);
  for (const auto& f : many) {
    ASSERT_TRUE(Eventually([&] { return f->points().size() == 1; },
                           absl::Seconds(30), absl::Milliseconds(10)));
  }
  // A query per round, not per follower. (A round's worth of slack, for a
  // follower that joined after the gate opened.)
  EXPECT_GT(lone_reads, 0);
  EXPECT_LE(store_->reads(), 3 * lone_reads)
      << "store reads for the first answers of " << kFollowers
      << " followers; for one: " << lone_reads;
  for (const auto& f : many) EXPECT_EQ(f->points(), many[0]->points());
}

}  // namespace
}  // namespace metrics::server
