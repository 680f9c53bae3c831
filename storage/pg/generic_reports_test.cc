// The platform's trial-metrics API in the store, on a real PostgreSQL: a
// trial's newest run (older runs refused, in the group commit too); reports
// whose sequence is their time (a copy is a duplicate, racing copies on two
// stores store once, a refused one does not move the position); and the
// platform's generic rows as it writes them (a copy changes nothing, new
// keys join the row of their step, a restarted run archives what it
// passed) and pages them.
#include <pqxx/connection>
#include <pqxx/nontransaction>

#include <thread>

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
using ::testing::ElementsAre;
using ::testing::HasSubstr;

const absl::Time kReportsT0 = absl::FromUnixSeconds(1796083200);

using ::metrics::test_util::Deadline;

class GenericReportsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_OK_AND_ASSIGN(db_, TestDatabase::Create());
    store_ = NewStore();
    ASSERT_OK(store_->CreateTrial(7, Deadline()).status());
  }
  void TearDown() override {
    if (store_ != nullptr) store_->Shutdown(Deadline());
  }

  std::unique_ptr<PgMetricStore> NewStore() const {
    PgMetricStoreOptions options;
    options.database_url = db_->url();
    options.clock = [] { return kReportsT0 + absl::Hours(1); };
    return PgMetricStore::Create(std::move(options));
  }

  std::string Query(const std::string& sql) const {
    pqxx::connection c(db_->url());
    pqxx::nontransaction tx(c);
    const pqxx::result r = tx.exec(sql);
    return r.empty() || r[0][0].is_null() ? "" : r[0][0].as<std::string>();
  }

  // A harness-like profiling report of `agent` at kReportsT0 + `seconds`.
  static MetricBatch Report(double seconds, std::optional<int32_t> run = 1,
                            absl::string_view agent = "node-1") {
    MetricBatch batch;
    batch.stream_id = absl::StrCat("\x01ReportTrialMetrics/cpu/", agent);
    batch.trial_id = 7;
    batch.agent_id = std::string(agent);
    batch.run_id = run;
    batch.sequence_is_time = true;
    const int64_t time_us = absl::ToUnixMicros(kReportsT0 + absl::Seconds(seconds));
    batch.sequence = time_us;
    batch.series = {{"cpu_util_simple", "", "percent"}};
    batch.reports = {{time_us, {0}, {seconds}, std::nullopt}};
    return batch;
  }

  static BatchOutcome Submit(MetricStore& store, MetricBatch batch) {
    BatchOutcome outcome;
    absl::Notification done;
    EXPECT_OK(store.SubmitBatch(std::move(batch), [&](BatchOutcome o) {
      outcome = std::move(o);
      done.Notify();
    }));
    done.WaitForNotification();
    return outcome;
  }

  GenericReport Training(int32_t steps, std::string avg, int32_t run = 1,
                         std::optional<std::string> batches = std::nullopt) {
    GenericReport r;
    r.trial_id = 7;
    r.run_id = run;
    r.group = "training";
    r.steps_completed = steps;
    r.time_us = absl::ToUnixMicros(kReportsT0 + absl::Seconds(steps));
    r.avg_metrics = std::move(avg);
    r.batch_metrics = std::move(batches);
    return r;
  }

  // (run, steps) of the trial's rows of `group` GetMetrics reads.
  std::vector<std::pair<int32_t, int32_t>> Rows(absl::string_view group) {
    std::vector<std::pair<int32_t, int32_t>> out;
    absl::StatusOr<std::vector<GenericRow>> rows =
        store_->ReadGenericReports(7, group, -1, 1000, Deadline());
    EXPECT_OK(rows.status());
    if (rows.ok()) {
      for (const GenericRow& r : *rows) out.emplace_back(r.run_id, r.total_batches);
    }
    return out;
  }

  std::unique_ptr<TestDatabase> db_;
  std::unique_ptr<PgMetricStore> store_;
};

TEST_F(GenericReportsTest, ATrialsNewestRunOnlyGrows) {
  ASSERT_OK_AND_ASSIGN(Trial t, store_->GetTrial(7, Deadline()));
  EXPECT_FALSE(t.run_id.has_value());
  ASSERT_OK_AND_ASSIGN(t, store_->BeginTrialRun(7, 2, Deadline()));
  EXPECT_EQ(t.run_id, 2);
  ASSERT_OK_AND_ASSIGN(t, store_->BeginTrialRun(7, 2, Deadline()));
  EXPECT_EQ(t.run_id, 2);
  EXPECT_THAT(store_->BeginTrialRun(7, 1, Deadline()),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("run 1 of trial 7 is older than run 2")));
  ASSERT_OK_AND_ASSIGN(t, store_->BeginTrialRun(7, 3, Deadline()));
  EXPECT_EQ(store_->GetTrial(7, Deadline())->run_id, 3);
  EXPECT_THAT(store_->BeginTrialRun(99, 1, Deadline()),
              StatusIs(absl::StatusCode::kNotFound));
  // An ended trial's runs stay as they were.
  ASSERT_OK(store_->SetTrialState(7, TrialState::kCompleted, Deadline()).status());
  ASSERT_OK_AND_ASSIGN(t, store_->BeginTrialRun(7, 4, Deadline()));
  EXPECT_EQ(t.run_id, 3);
}

TEST_F(GenericReportsTest, ABatchOfAnOlderRunIsRefusedAndMovesNoPosition) {
  ASSERT_OK(store_->BeginTrialRun(7, 2, Deadline()).status());
  const BatchOutcome old = Submit(*store_, Report(5, 1));
  EXPECT_EQ(old.kind, BatchOutcome::Kind::kRejected);
  EXPECT_THAT(old.status, StatusIs(absl::StatusCode::kFailedPrecondition,
                                   HasSubstr("older than run 2")));
  // The same time from the newest run is no copy of the refused one.
  EXPECT_EQ(Submit(*store_, Report(5, 2)).kind, BatchOutcome::Kind::kStored);
  EXPECT_EQ(Query("SELECT count(*) FROM metrics"), "1");
}

TEST_F(GenericReportsTest, AReportAtOrBeforeItsStreamsNewestTimeIsACopy) {
  EXPECT_EQ(Submit(*store_, Report(10)).kind, BatchOutcome::Kind::kStored);
  EXPECT_EQ(Submit(*store_, Report(10)).kind, BatchOutcome::Kind::kDuplicate);
  // Times leave gaps: that is no missing batch.
  EXPECT_EQ(Submit(*store_, Report(20.5)).kind, BatchOutcome::Kind::kStored);
  EXPECT_EQ(Submit(*store_, Report(15)).kind, BatchOutcome::Kind::kDuplicate);
  // Another agent is another stream.
  EXPECT_EQ(Submit(*store_, Report(10, 1, "node-2")).kind, BatchOutcome::Kind::kStored);
  EXPECT_EQ(Query("SELECT count(*) FROM metrics"), "3");
  EXPECT_EQ(Query("SELECT count(*) FROM series"), "2");
}

TEST_F(GenericReportsTest, CopiesRacingOnTwoStoresAreStoredOnce) {
  std::unique_ptr<PgMetricStore> other = NewStore();
  for (int round = 0; round < 20; ++round) {
    std::vector<BatchOutcome> outcomes(2);
    std::thread a([&] { outcomes[0] = Submit(*store_, Report(round)); });
    std::thread b([&] { outcomes[1] = Submit(*other, Report(round)); });
    a.join();
    b.join();
    int stored = 0;
    for (const BatchOutcome& o : outcomes) {
      EXPECT_TRUE(o.kind == BatchOutcome::Kind::kStored ||
                  o.kind == BatchOutcome::Kind::kDuplicate)
          << o.status;
      stored += o.kind == BatchOutcome::Kind::kStored;
    }
    EXPECT_EQ(stored, 1) << "round " << round;
  }
  other->Shutdown(Deadline());
  EXPECT_EQ(Query("SELECT count(*) FROM metrics"), "20");
  // The rollups counted each report once too.
  ASSERT_OK_AND_ASSIGN(std::vector<SeriesInfo> series,
                       store_->Reads().ListSeries(7, /*extents=*/true, Deadline()));
  ASSERT_EQ(series.size(), 1u);
  EXPECT_EQ(series[0].sample_count, 20);
}

TEST_F(GenericReportsTest, AGenericReportIsTheRowOfItsStepOnce) {
  ASSERT_OK_AND_ASSIGN(GenericWrite w,
                       store_->WriteGenericReport(
                           Training(100, R"({"loss": 0.5})", 1, R"([{"loss": 0.6}])"),
                           Deadline()));
  EXPECT_EQ(w, GenericWrite::kStored);
  EXPECT_EQ(Query("SELECT metrics::text FROM metrics_training"),
            R"({"avg_metrics": {"loss": 0.5}, "batch_metrics": [{"loss": 0.6}]})");
  EXPECT_EQ(Query("SELECT trial_run_id FROM metrics_training"), "1");
  EXPECT_EQ(Query("SELECT run_id FROM trials"), "1");
  // A copy, its numbers written otherwise, changes nothing.
  ASSERT_OK_AND_ASSIGN(w, store_->WriteGenericReport(
                              Training(100, R"({"loss": 0.50})", 1, R"([{"loss": 6e-1}])"),
                              Deadline()));
  EXPECT_EQ(w, GenericWrite::kDuplicate);
  // New keys join the step's row, as the platform merges them.
  ASSERT_OK_AND_ASSIGN(
      w, store_->WriteGenericReport(Training(100, R"({"loss": 0.5, "lr": 0.1})"), Deadline()));
  EXPECT_EQ(w, GenericWrite::kMerged);
  EXPECT_EQ(Query("SELECT metrics->'avg_metrics' FROM metrics_training"),
            R"({"lr": 0.1, "loss": 0.5})");
  EXPECT_EQ(Query("SELECT count(*) FROM metrics_training"), "1");
  // Another value for a key, or batch metrics again, is refused.
  EXPECT_THAT(store_->WriteGenericReport(Training(100, R"({"loss": 0.7})"), Deadline()),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("metrics.metrics.avgMetrics.loss: the report of steps 100 in "
                                 "group \"training\" of trial 7 has another value for it")));
  EXPECT_THAT(store_->WriteGenericReport(
                  Training(100, R"({"x": 1})", 1, R"([{"loss": 1}])"), Deadline()),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("has batch metrics already")));
  // Without steps, every report is a row of its own.
  GenericReport custom = Training(0, R"({"x": 1})");
  custom.group = "my group";
  custom.steps_completed.reset();
  custom.time_us.reset();
  for (int i = 0; i < 2; ++i) {
    ASSERT_OK_AND_ASSIGN(w, store_->WriteGenericReport(custom, Deadline()));
    EXPECT_EQ(w, GenericWrite::kStored);
  }
  EXPECT_EQ(Query("SELECT count(*) FROM metrics_generic WHERE metric_group = 'my group' "
                  "AND total_batches IS NULL AND end_time > now() - interval '1 minute'"),
            "2");
  // Validation keeps its values under its own key, and no batch metrics.
  GenericReport validation = Training(100, R"({"validation_loss": 0.9})", 1, "[]");
  validation.group = "validation";
  ASSERT_OK(store_->WriteGenericReport(validation, Deadline()).status());
  EXPECT_EQ(Query("SELECT metrics::text FROM metrics_validation"),
            R"({"validation_metrics": {"validation_loss": 0.9}})");
}

TEST_F(GenericReportsTest, ARestartedRunArchivesWhatItPassed) {
  GenericReport validation = Training(200, R"({"v": 1})");
  validation.group = "validation";
  for (int32_t steps : {100, 200, 300}) {
    ASSERT_OK(store_->WriteGenericReport(Training(steps, R"({"loss": 1})"), Deadline()).status());
    validation.steps_completed = steps;
    ASSERT_OK(store_->WriteGenericReport(validation, Deadline()).status());
  }
  // Run 2 resumed from the checkpoint of step 200: training rows from 200
  // on go, validation rows after 200 (the platform's rule).
  ASSERT_OK(store_->WriteGenericReport(Training(200, R"({"loss": 2})", 2), Deadline()).status());
  EXPECT_THAT(Rows("training"), ElementsAre(std::pair(1, 100), std::pair(2, 200)));
  EXPECT_THAT(Rows("validation"), ElementsAre(std::pair(1, 100), std::pair(1, 200)));
  EXPECT_EQ(Query("SELECT count(*) FROM metrics WHERE archived"), "3");
  // Its own copies and later steps archive nothing more.
  ASSERT_OK(store_->WriteGenericReport(Training(200, R"({"loss": 2})", 2), Deadline()).status());
  ASSERT_OK(store_->WriteGenericReport(Training(300, R"({"loss": 3})", 2), Deadline()).status());
  EXPECT_THAT(Rows("training"),
              ElementsAre(std::pair(1, 100), std::pair(2, 200), std::pair(2, 300)));
  // Run 1 reports no more.
  EXPECT_THAT(store_->WriteGenericReport(Training(400, R"({"loss": 1})", 1), Deadline()),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("older than run 2")));
}

TEST_F(GenericReportsTest, TerminalAndUnknownTrialsAreRefused) {
  GenericReport unknown = Training(1, "{}");
  unknown.trial_id = 99;
  EXPECT_THAT(store_->WriteGenericReport(unknown, Deadline()),
              StatusIs(absl::StatusCode::kNotFound));
  ASSERT_OK(store_->SetTrialState(7, TrialState::kCompleted, Deadline()).status());
  EXPECT_THAT(store_->WriteGenericReport(Training(1, "{}"), Deadline()),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("COMPLETED")));
  EXPECT_EQ(Query("SELECT count(*) FROM metrics"), "0");
}

TEST_F(GenericReportsTest, RowsArePagedAsThePlatformPagesThem) {
  for (int32_t steps = 1; steps <= 5; ++steps) {
    ASSERT_OK(store_->WriteGenericReport(Training(steps, R"({"loss": 1})"), Deadline()).status());
  }
  GenericReport custom = Training(3, R"({"x": 1})");
  custom.group = "mine";
  ASSERT_OK(store_->WriteGenericReport(custom, Deadline()).status());
  ASSERT_OK_AND_ASSIGN(std::vector<GenericRow> page,
                       store_->ReadGenericReports(7, "training", 2, 2, Deadline()));
  ASSERT_EQ(page.size(), 2u);
  EXPECT_EQ(page[0].total_batches, 3);
  EXPECT_EQ(page[1].total_batches, 4);
  EXPECT_EQ(page[0].group, "training");
  EXPECT_EQ(page[0].time_us, absl::ToUnixMicros(kReportsT0 + absl::Seconds(3)));
  EXPECT_EQ(page[0].metrics_json, R"({"avg_metrics": {"loss": 1}, "batch_metrics": null})");
  EXPECT_GT(page[0].id, 0);
  ASSERT_OK_AND_ASSIGN(std::vector<GenericRow> mine,
                       store_->ReadGenericReports(7, "mine", -1, 10, Deadline()));
  ASSERT_EQ(mine.size(), 1u);
  EXPECT_EQ(mine[0].group, "mine");
  // The profiling groups' values are system series, not rows.
  ASSERT_OK(Submit(*store_, Report(1)).status);
  ASSERT_OK_AND_ASSIGN(std::vector<GenericRow> cpu,
                       store_->ReadGenericReports(7, "cpu", -1, 10, Deadline()));
  EXPECT_TRUE(cpu.empty());
  EXPECT_THAT(store_->ReadGenericReports(99, "training", -1, 10, Deadline()),
              StatusIs(absl::StatusCode::kNotFound));
}

}  // namespace
}  // namespace metrics::storage::pg
