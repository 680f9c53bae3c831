#include "storage/pg/testing/store_test.h"

#include <pqxx/connection>
#include <pqxx/nontransaction>

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "common/testing/status_matchers.h"
#include "tests/testing/test_database.h"

namespace metrics::storage::pg::test_util {

namespace {

std::unique_ptr<::metrics::test_util::TestDatabase>& SharedDatabase() {
  static auto* db = new std::unique_ptr<::metrics::test_util::TestDatabase>();
  return *db;
}

}  // namespace

void StoreTest::SetUpTestSuite() {
  auto db = ::metrics::test_util::TestDatabase::Create();
  ASSERT_OK(db);
  SharedDatabase() = *std::move(db);
}

void StoreTest::TearDownTestSuite() { SharedDatabase().reset(); }

void StoreTest::SetUp() {
  ASSERT_NE(SharedDatabase(), nullptr);
  EmptyTables();
  store_ = NewStore();
}

void StoreTest::TearDown() {
  if (store_ != nullptr) store_->Shutdown(absl::Now() + absl::Seconds(10));
}

std::string StoreTest::url() { return SharedDatabase()->url(); }

void StoreTest::EmptyTables() {
  Exec("TRUNCATE trials, metrics, series, system_rollups, ingest_positions, "
       "trial_series_counts");
}

std::unique_ptr<PgMetricStore> StoreTest::NewStore(PgMetricStoreOptions options) {
  if (options.database_url.empty()) options.database_url = url();
  options.clock = [] { return kT0 + absl::Hours(24 * 365); };
  return PgMetricStore::Create(std::move(options));
}

pqxx::result StoreTest::Exec(const std::string& sql) {
  pqxx::connection conn(url());
  pqxx::nontransaction tx(conn);
  return tx.exec(sql);
}

std::string StoreTest::Scalar(const std::string& sql) {
  pqxx::result r = Exec(sql);
  return r.empty() || r[0][0].is_null() ? "" : r[0][0].as<std::string>();
}

BatchOutcome StoreTest::Submit(MetricStore& store, MetricBatch batch) {
  absl::Notification done;
  BatchOutcome outcome;
  absl::Status queued = store.SubmitBatch(std::move(batch), [&](BatchOutcome o) {
    outcome = std::move(o);
    done.Notify();
  });
  EXPECT_OK(queued);
  if (!queued.ok()) return outcome;
  EXPECT_TRUE(done.WaitForNotificationWithTimeout(absl::Seconds(60)));
  return outcome;
}

MetricBatch StoreTest::Batch(int32_t trial, int64_t sequence, absl::string_view agent) {
  MetricBatch batch;
  batch.stream_id = absl::StrCat(agent, "-stream");
  batch.sequence = sequence;
  batch.trial_id = trial;
  batch.agent_id = std::string(agent);
  batch.series = {{"cpu_util_simple", "", "percent"},
                  {"gpu_util", "GPU-1", "percent"},
                  {"gpu_util", "GPU-2", "percent"}};
  const absl::Time t = kT0 + absl::Seconds(sequence);
  batch.reports = {{absl::ToUnixMicros(t), {0, 1, 2}, {10.0 + sequence, 50, 60}, std::nullopt}};
  return batch;
}

void StoreTest::MakeTrial(int32_t id) { ASSERT_OK(store_->CreateTrial(id, Deadline())); }

}  // namespace metrics::storage::pg::test_util
