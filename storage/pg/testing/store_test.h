// StoreTest: the gtest fixture of tests that run a PgMetricStore on a real
// PostgreSQL with the real migrations. A suite shares one throwaway
// database; every test starts with the tables ingest writes emptied and a
// fresh store (store_) whose clock reads a year after kT0, so batches timed
// from kT0 are never in the future. Helpers submit a batch and wait for its
// outcome, and read the database directly.
//
// Thread-safety: test-only; one test at a time. Exec and Scalar open their
// own connection and may be called from any thread.
#ifndef METRICS_STORAGE_PG_TESTING_STORE_TEST_H_
#define METRICS_STORAGE_PG_TESTING_STORE_TEST_H_

#include <pqxx/result>

#include <cstdint>
#include <memory>
#include <string>

#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "common/testing/test_time.h"
#include "gtest/gtest.h"
#include "storage/metric_store.h"
#include "storage/pg/pg_metric_store.h"

namespace metrics::storage::pg::test_util {

// 2025-11-22 08:26:40 UTC: where the fixture's batches start.
using ::metrics::test_util::kT0;

class StoreTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite();
  static void TearDownTestSuite();

  // Empties the tables and opens store_; TearDown shuts it down.
  void SetUp() override;
  void TearDown() override;

  // The suite's database.
  static std::string url();

  // Empties every table ingest writes (trials, raw rows, registry, rollups,
  // stream positions, series counts).
  static void EmptyTables();

  // A store on the suite's database (where `options` names none), its clock
  // a year after kT0.
  static std::unique_ptr<PgMetricStore> NewStore(
      PgMetricStoreOptions options = PgMetricStoreOptions());

  static pqxx::result Exec(const std::string& sql);
  // The first column of the first row as text; "" for none or NULL.
  static std::string Scalar(const std::string& sql);

  static absl::Time Deadline() { return absl::Now() + absl::Seconds(30); }

  // Submits `batch` and waits (up to a minute) for its outcome.
  static BatchOutcome Submit(MetricStore& store, MetricBatch batch);
  BatchOutcome Submit(MetricBatch batch) { return Submit(*store_, std::move(batch)); }

  // One report at kT0 + `sequence` s of three series (an agent-wide one and
  // two GPUs'), on the agent's stream "<agent>-stream".
  static MetricBatch Batch(int32_t trial, int64_t sequence,
                           absl::string_view agent = "agent-1");

  void MakeTrial(int32_t id);

  std::unique_ptr<PgMetricStore> store_;
};

}  // namespace metrics::storage::pg::test_util

#endif  // METRICS_STORAGE_PG_TESTING_STORE_TEST_H_
