// Migration 0004 on a database of a few million rows in the layout before it,
// while the platform writes (docs/operating.md, "Upgrades"): a training-
// metrics writer and a writer of system rows as the release before 0004
// wrote them (jsonb rows and their ingest positions, one transaction each).
// metricsctl migrate up is killed in the middle of an index build, its
// connection cut, and run again: it resumes. No write waits as long as a
// second, none fails or goes missing, and the schema at the end is the one
// a fresh migration makes (pg_dump --schema-only, compared whole).
//
// The worst wait and the number of writes are printed and recorded as test
// properties (ctest --output-on-failure -V shows them).
//
// Then the sealing of a database's existing packed rows after 0007, online
// and resumed after a kill, the same way.
#include <pqxx/connection>
#include <pqxx/nontransaction>
#include <pqxx/transaction>

#include <signal.h>

#include <algorithm>
#include <atomic>
#include <functional>
#include <iostream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/subprocess.h"
#include "common/testing/eventually.h"
#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "migrations/migrator.h"
#include "storage/pg/testing/pg_checks.h"
#include "tests/testing/test_database.h"

namespace metrics::migrations {
namespace {

using ::metrics::common::Subprocess;
using ::metrics::test_util::TestDatabase;
using ::metrics::test_util::TestDatabaseOptions;
using ::testing::HasSubstr;

constexpr int kSystemRows = 2'000'000;
constexpr int kTrainingRows = 1'000'000;

std::string Query(const std::string& url, const std::string& sql) {
  pqxx::connection conn(url);
  pqxx::nontransaction tx(conn);
  pqxx::result r = tx.exec(sql);
  return r.empty() || r[0][0].is_null() ? "" : r[0][0].as<std::string>();
}

// Runs each statement on a connection of its own, all at once: the tests
// run alone, and loading on both cores takes about two thirds of the time.
void RunAtOnce(const std::string& url, const std::vector<std::string>& statements) {
  std::vector<std::thread> threads;
  std::vector<std::string> errors(statements.size());
  for (size_t i = 0; i < statements.size(); ++i) {
    threads.emplace_back([&, i] {
      try {
        Query(url, statements[i]);
      } catch (const std::exception& e) {
        errors[i] = e.what();
      }
    });
  }
  for (std::thread& t : threads) t.join();
  for (const std::string& error : errors) EXPECT_EQ(error, "");
}

// Writes in a loop on its own connection until stopped, timing each write.
class Writer {
 public:
  // `write` runs one write on the connection.
  Writer(const std::string& url,
         std::function<void(pqxx::connection&, int)> write)
      : conn_(url), write_(std::move(write)) {
    thread_ = std::thread([this] { Loop(); });
  }
  ~Writer() { Stop(); }

  void Stop() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
  }
  // After Stop.
  int writes() const { return writes_; }
  absl::Duration worst() const { return worst_; }
  const std::string& error() const { return error_; }

 private:
  void Loop() {
    while (!stop_) {
      const absl::Time start = absl::Now();
      try {
        write_(conn_, writes_);
      } catch (const std::exception& e) {
        error_ = e.what();
        return;
      }
      worst_ = std::max(worst_, absl::Now() - start);
      ++writes_;
      absl::SleepFor(absl::Milliseconds(5));
    }
  }

  pqxx::connection conn_;
  std::function<void(pqxx::connection&, int)> write_;
  std::atomic<bool> stop_{false};
  int writes_ = 0;
  absl::Duration worst_;
  std::string error_;
  std::thread thread_;
};

std::string SchemaDump(const std::string& url) {
  absl::StatusOr<std::unique_ptr<Subprocess>> dump = Subprocess::Start(
      {"pg_dump", "--schema-only", "--no-owner", "--no-privileges", "-d", url});
  EXPECT_OK(dump);
  if (!dump.ok()) return "";
  absl::StatusOr<int> code = (*dump)->Wait(absl::Seconds(60));
  EXPECT_OK(code);
  EXPECT_EQ(code.ok() ? *code : -1, 0) << (*dump)->stderr_text();
  // Newer pg_dumps fence the script with "\restrict KEY" lines, a random key
  // each run.
  std::vector<absl::string_view> lines;
  for (absl::string_view line : absl::StrSplit((*dump)->stdout_text(), '\n')) {
    if (!absl::StartsWith(line, "\\restrict") &&
        !absl::StartsWith(line, "\\unrestrict")) {
      lines.push_back(line);
    }
  }
  return absl::StrJoin(lines, "\n");
}

TEST(OnlineMigrationTest, MigrationOf0004LetsWritesGoOnAndResumesAfterAKill) {
  TestDatabaseOptions old_layout;
  old_layout.migrate = false;
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<TestDatabase> db,
                       TestDatabase::Create(old_layout));
  {
    MigratorOptions options;
    options.database_url = db->url();
    ASSERT_OK_AND_ASSIGN(std::unique_ptr<Migrator> migrator,
                         Migrator::Create(options));
    ASSERT_OK(migrator->Up(3));
  }
  const absl::Time load_start = absl::Now();
  // The system rows in two halves, beside the training rows.
  std::vector<std::string> loads;
  for (const int first : {1, 1 + kSystemRows / 2}) {
    loads.push_back(absl::StrCat(R"sql(
    INSERT INTO metrics (trial_id, partition_type, metric_group, agent_id,
                         end_time, metrics)
    SELECT 1 + g % 40, 'PROFILING', 'system', 'node-' || g % 16,
           timestamptz '2026-01-01' + g * interval '1 second',
           jsonb_build_object('cpu_util', g % 100,
                              'gpu_util', jsonb_build_object('GPU-0', g % 7))
      FROM generate_series()sql", first, ", ", first + kSystemRows / 2 - 1, ") g"));
  }
  loads.push_back(absl::StrCat(R"sql(
    INSERT INTO metrics (trial_id, partition_type, metric_group, end_time,
                         total_batches, metrics)
    SELECT 1 + g % 40, 'TRAINING', 'training',
           timestamptz '2026-01-01' + g * interval '1 second', g,
           jsonb_build_object('loss', 1.0 / g)
      FROM generate_series(1, )sql", kTrainingRows, ") g"));
  RunAtOnce(db->url(), loads);
  Query(db->url(), "ANALYZE metrics");
  std::cout << "loaded " << kSystemRows + kTrainingRows << " rows in "
            << absl::FormatDuration(absl::Now() - load_start) << std::endl;

  Writer training(db->url(), [](pqxx::connection& conn, int n) {
    pqxx::nontransaction(conn).exec_params(
        "INSERT INTO metrics (trial_id, partition_type, metric_group, "
        "end_time, total_batches, metrics) VALUES (100, 'TRAINING', "
        "'training', now(), $1, '{\"loss\": 0.5}')",
        n);
  });
  Writer system(db->url(), [](pqxx::connection& conn, int n) {
    pqxx::work tx(conn);
    tx.exec(
        "INSERT INTO metrics (trial_id, partition_type, metric_group, "
        "agent_id, end_time, metrics) VALUES (100, 'PROFILING', 'system', "
        "'live', now(), '{\"cpu_util\": 12.5}')");
    tx.exec_params(
        "INSERT INTO ingest_positions (trial_id, stream_id, last_sequence) "
        "VALUES (100, 'live', $1) ON CONFLICT (trial_id, stream_id) "
        "DO UPDATE SET last_sequence = EXCLUDED.last_sequence",
        n);
    tx.commit();
  });

  const std::vector<std::string> env = {absl::StrCat("DATABASE_URL=", db->url())};
  const absl::Time migrate_start = absl::Now();
  {
    // The first run is killed while it builds the biggest index, and its
    // connection cut, as a crash of the machine running it would.
    ASSERT_OK_AND_ASSIGN(std::unique_ptr<Subprocess> first,
                         Subprocess::Start({METRICSCTL_PATH, "migrate", "up"}, env));
    std::string backend;
    ASSERT_TRUE(test_util::Eventually(
        [&] {
          backend = Query(db->url(),
                          "SELECT pid FROM pg_stat_activity WHERE query LIKE "
                          "'%CONCURRENTLY metrics_profiling_system_idx%' "
                          "AND application_name = 'metricsctl' "
                          "AND datname = current_database()");
          // Past the build's first transaction, which commits the index
          // (invalid) to the catalog: a kill before it leaves no index.
          return !backend.empty() &&
                 Query(db->url(), "SELECT count(*) FROM pg_index WHERE indexrelid = "
                                  "to_regclass('metrics_profiling_system_idx')") == "1";
        },
        absl::Seconds(120)))
        << "metricsctl did not reach the index build: "
        << first->stdout_text() << first->stderr_text();
    first->Signal(SIGKILL);
    Query(db->url(), absl::StrCat("SELECT pg_terminate_backend(", backend, ")"));
    ASSERT_OK(first->Wait(absl::Seconds(10)));
  }
  ASSERT_TRUE(test_util::Eventually(
      [&] {
        return Query(db->url(), "SELECT count(*) FROM pg_stat_activity WHERE "
                                "application_name = 'metricsctl' "
                                "AND datname = current_database()") == "0";
      },
      absl::Seconds(30)))
      << "the killed run's backend is still there";
  EXPECT_EQ(Query(db->url(), "SELECT indisvalid FROM pg_index WHERE "
                             "indexrelid = 'metrics_profiling_system_idx'::regclass"),
            "f");
  {
    ASSERT_OK_AND_ASSIGN(std::unique_ptr<Subprocess> status,
                         Subprocess::Start({METRICSCTL_PATH, "migrate", "status"}, env));
    ASSERT_OK(status->Wait(absl::Seconds(30)));
    EXPECT_THAT(status->stdout_text(),
                testing::ContainsRegex("0004 +packed_values +partial +5 of 9 steps done"));
  }
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Subprocess> second,
                       Subprocess::Start({METRICSCTL_PATH, "migrate", "up"}, env));
  ASSERT_OK_AND_ASSIGN(int code, second->Wait(absl::Seconds(240)));
  const absl::Duration migrate_took = absl::Now() - migrate_start;
  EXPECT_EQ(code, 0) << second->stdout_text() << second->stderr_text();
  EXPECT_THAT(second->stdout_text(),
              HasSubstr("resuming 0004_packed_values at step 6 of 9"));
  EXPECT_THAT(second->stdout_text(),
              HasSubstr("dropping the invalid index metrics_profiling_system_idx"));
  EXPECT_THAT(second->stdout_text(), HasSubstr("applied 0005_agent_inventories"));

  // Writes go on after the new key and check are in force.
  absl::SleepFor(absl::Milliseconds(500));
  training.Stop();
  system.Stop();
  for (const Writer* w : {&training, &system}) {
    EXPECT_EQ(w->error(), "");
    EXPECT_GT(w->writes(), 100);
    EXPECT_LT(w->worst(), absl::Seconds(1));
  }
  std::cout << "migration (both runs) took " << absl::FormatDuration(migrate_took)
            << "; training writes " << training.writes() << ", worst wait "
            << absl::FormatDuration(training.worst()) << "; system writes "
            << system.writes() << ", worst wait "
            << absl::FormatDuration(system.worst()) << std::endl;
  ::testing::Test::RecordProperty(
      "worst_write_wait_ms",
      absl::ToInt64Milliseconds(std::max(training.worst(), system.worst())));

  // Nothing lost, nothing doubled.
  EXPECT_EQ(Query(db->url(), "SELECT count(*) FROM metrics WHERE trial_id < 100"),
            std::to_string(kSystemRows + kTrainingRows));
  EXPECT_EQ(Query(db->url(), "SELECT count(*) FROM metrics WHERE trial_id = 100 "
                             "AND metric_group = 'training'"),
            std::to_string(training.writes()));
  EXPECT_EQ(Query(db->url(), "SELECT count(*) FROM metrics WHERE trial_id = 100 "
                             "AND metric_group = 'system'"),
            std::to_string(system.writes()));

  ASSERT_OK_AND_ASSIGN(std::unique_ptr<TestDatabase> fresh, TestDatabase::Create());
  const std::string upgraded = SchemaDump(db->url());
  const std::string expected = SchemaDump(fresh->url());
  ASSERT_FALSE(expected.empty());
  if (upgraded != expected) {
    // Name the first line that differs rather than print two whole dumps.
    std::vector<std::string> a = absl::StrSplit(upgraded, '\n');
    std::vector<std::string> b = absl::StrSplit(expected, '\n');
    size_t i = 0;
    while (i < a.size() && i < b.size() && a[i] == b[i]) ++i;
    ADD_FAILURE() << "the upgraded schema differs from a fresh one at line "
                  << i + 1 << ":\n  upgraded: "
                  << (i < a.size() ? a[i] : "(end)")
                  << "\n  fresh:    " << (i < b.size() ? b[i] : "(end)");
  }
}


// Packed raw system rows of a database upgraded to sealed windows are
// sealed online: `metricsctl seal` is killed (and its connection cut)
// halfway, a second run resumes, and meanwhile a writer adds raw rows
// every 5 ms, late ones into the very windows being sealed. Every value is
// there once afterwards, and no write waited long.
TEST(OnlineMigrationTest, ExistingPackedRowsAreSealedOnlineAndAKilledSealResumes) {
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<TestDatabase> db, TestDatabase::Create());
  constexpr int kAgents = 20;
  constexpr int kRows = 1'200'000;
  // A packed row of three small whole values, as storage/format/packed_report.h
  // writes one: the version byte, then per value a head byte (id step 1,
  // kind 0: a decimal of no places) and its digits.
  const std::string packed =
      "decode('01' || '10' || lpad(to_hex(g % 100), 2, '0') || '10' || "
      "lpad(to_hex(g % 7), 2, '0') || '10' || lpad(to_hex(g % 120), 2, '0'), 'hex')";
  const absl::Time load_start = absl::Now();
  // In two halves at once.
  std::vector<std::string> halves;
  for (const int first : {0, kRows / 2}) {
    halves.push_back(absl::StrCat(
        "INSERT INTO metrics_profiling (trial_id, partition_type, metric_group, agent_id, "
        "end_time, packed_values) SELECT 1 + g % 2, 'PROFILING', 'system', 'node-' || g % ",
        kAgents, ", timestamptz '2026-01-01' + (g / ", kAgents,
        ") * interval '1 second', ", packed, " FROM generate_series(", first, ", ",
        first + kRows / 2 - 1, ") g"));
  }
  RunAtOnce(db->url(), halves);
  Query(db->url(), "ANALYZE metrics");
  std::cout << "loaded " << kRows << " packed rows in "
            << absl::FormatDuration(absl::Now() - load_start) << std::endl;

  // Late reports of node-0 into the loaded span, each at a time of its own.
  Writer late(db->url(), [&](pqxx::connection& conn, int n) {
    pqxx::nontransaction(conn).exec_params(
        absl::StrCat("INSERT INTO metrics_profiling (trial_id, partition_type, metric_group, "
                     "agent_id, end_time, packed_values) SELECT 2, 'PROFILING', 'system', "
                     "'node-0', timestamptz '2026-01-01' + ($1 * 7 + 0.5) * interval '1 second', ",
                     packed, " FROM (SELECT $1::int AS g) x"),
        n);
  });

  const std::vector<std::string> env = {absl::StrCat("DATABASE_URL=", db->url())};
  const absl::Time seal_start = absl::Now();
  {
    ASSERT_OK_AND_ASSIGN(std::unique_ptr<Subprocess> first,
                         Subprocess::Start({METRICSCTL_PATH, "seal"}, env));
    ASSERT_TRUE(test_util::Eventually(
        [&] {
          return std::stoll(Query(db->url(), "SELECT count(*) FROM metrics_profiling "
                                             "WHERE sealed_values IS NOT NULL")) > 300;
        },
        absl::Seconds(120)))
        << first->stdout_text() << first->stderr_text();
    first->Signal(SIGKILL);
    // This database's sealer only: tests beside this one seal too.
    Query(db->url(), "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                     "WHERE application_name = 'metrics-sealer' "
                     "AND datname = current_database()");
    ASSERT_OK(first->Wait(absl::Seconds(10)));
  }
  const std::string sealed_by_first = Query(
      db->url(), "SELECT count(*) FROM metrics_profiling WHERE sealed_values IS NOT NULL");
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Subprocess> second,
                       Subprocess::Start({METRICSCTL_PATH, "seal"}, env));
  ASSERT_OK_AND_ASSIGN(int code, second->Wait(absl::Seconds(300)));
  const absl::Duration seal_took = absl::Now() - seal_start;
  EXPECT_EQ(code, 0) << second->stdout_text() << second->stderr_text();
  EXPECT_THAT(second->stdout_text(), testing::ContainsRegex("sealed [0-9]+ windows of [0-9]+ agents"));
  EXPECT_THAT(second->stdout_text(), HasSubstr("vacuumed the profiling partition"));
  EXPECT_NE(Query(db->url(), "SELECT last_vacuum FROM pg_stat_user_tables "
                             "WHERE relname = 'metrics_profiling'"),
            "");
  late.Stop();
  EXPECT_EQ(late.error(), "");
  EXPECT_GT(late.writes(), 100);
  EXPECT_LT(late.worst(), absl::Seconds(1));
  std::cout << "sealed " << kRows << " rows in " << absl::FormatDuration(seal_took)
            << " (the first run " << sealed_by_first << " windows before its kill); "
            << late.writes() << " late writes, worst wait "
            << absl::FormatDuration(late.worst()) << std::endl;

  // Every value once: 3 a report, in rows raw or sealed.
  ASSERT_OK_AND_ASSIGN(const int64_t values, storage::pg::test_util::CountRawValues(db->url(), 1));
  ASSERT_OK_AND_ASSIGN(const int64_t values_2,
                       storage::pg::test_util::CountRawValues(db->url(), 2));
  EXPECT_EQ(values + values_2, 3 * (int64_t{kRows} + late.writes()));
  for (int trial : {1, 2}) {
    EXPECT_EQ(storage::pg::test_util::CountRepeatedReports(db->url(), trial).value_or(-1), 0);
  }
  // What is left raw came after the second run passed its window.
  EXPECT_LE(std::stoll(Query(db->url(), "SELECT count(*) FROM metrics_profiling "
                                        "WHERE packed_values IS NOT NULL")),
            late.writes());
  EXPECT_EQ(Query(db->url(), "SELECT count(*) FROM (SELECT trial_id, agent_id, end_time "
                             "FROM metrics_profiling WHERE sealed_values IS NOT NULL "
                             "GROUP BY 1, 2, 3 HAVING count(*) > 1) twice"),
            "0");
}

TEST(OnlineMigrationTest, MetricsctlSealRefusesBadUsageNamingWhat) {
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<TestDatabase> db, TestDatabase::Create());
  const std::vector<std::string> env = {absl::StrCat("DATABASE_URL=", db->url())};
  struct Case {
    std::vector<std::string> args;
    int code;
    std::string says;
  };
  for (const Case& c : std::vector<Case>{
           {{"seal", "now"}, 2, "unexpected argument \"now\""},
           {{"seal", "--grace=-1s"}, 2, "--grace -1s: must be a duration from 0s"},
           {{"seal", "--grace=soon"}, 2, "--grace soon: must be a duration"},
           {{"seal", "--help"}, 0, "Usage: metricsctl seal [--grace=DURATION]"},
           {{"seal"}, 0, "sealed 0 windows of 0 agents"}}) {
    std::vector<std::string> argv = {METRICSCTL_PATH};
    argv.insert(argv.end(), c.args.begin(), c.args.end());
    ASSERT_OK_AND_ASSIGN(std::unique_ptr<Subprocess> run, Subprocess::Start(argv, env));
    ASSERT_OK_AND_ASSIGN(int code, run->Wait(absl::Seconds(30)));
    EXPECT_EQ(code, c.code) << c.args.back();
    EXPECT_THAT(run->stdout_text() + run->stderr_text(), HasSubstr(c.says)) << c.args.back();
  }
}

}  // namespace
}  // namespace metrics::migrations
