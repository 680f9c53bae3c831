// Tests of the migrator and of metricsctl's migrate commands against a real
// PostgreSQL, each test on a fresh, empty database of its own.
#include "migrations/migrator.h"

#include <pqxx/connection>
#include <pqxx/nontransaction>
#include <pqxx/result>
#include <pqxx/transaction>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <functional>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "common/subprocess.h"
#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "migrations/database_admin.h"
#include "tests/testing/test_database.h"

namespace metrics::migrations {
namespace {

using ::metrics::test_util::StatusIs;
using ::metrics::common::Subprocess;
using ::metrics::test_util::TestDatabase;
using ::metrics::test_util::TestDatabaseOptions;
using ::testing::AllOf;
using ::testing::ContainsRegex;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Not;

// Everything about the public schema a migration could change, one fact per
// line, sorted: columns, constraints, indexes, partitions, sequences.
constexpr char kCatalogQuery[] = R"sql(
SELECT coalesce(string_agg(fact, E'\n' ORDER BY fact), '') FROM (
  SELECT format('column %s.%s %s null=%s default=%s identity=%s',
                table_name, column_name, data_type, is_nullable,
                column_default, identity_generation)
    FROM information_schema.columns WHERE table_schema = 'public'
  UNION ALL
  SELECT format('constraint %s %s %s', conrelid::regclass, conname,
                pg_get_constraintdef(oid))
    FROM pg_constraint WHERE connamespace = 'public'::regnamespace
  UNION ALL
  SELECT format('index %s', indexdef) FROM pg_indexes
   WHERE schemaname = 'public'
  UNION ALL
  SELECT format('partition %s of %s %s', c.relname, p.relname,
                pg_get_expr(c.relpartbound, c.oid))
    FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
    JOIN pg_class p ON p.oid = i.inhparent
   WHERE p.relnamespace = 'public'::regnamespace
  UNION ALL
  SELECT format('sequence %s %s', sequencename, data_type) FROM pg_sequences
   WHERE schemaname = 'public'
) facts(fact))sql";

class MigratorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    TestDatabaseOptions options;
    options.migrate = false;
    absl::StatusOr<std::unique_ptr<TestDatabase>> db =
        TestDatabase::Create(options);
    ASSERT_OK(db);
    db_ = *std::move(db);
  }

  std::unique_ptr<Migrator> NewMigrator(
      std::vector<Migration> migrations = EmbeddedMigrations(),
      const std::function<void(MigratorOptions&)>& adjust = nullptr) {
    MigratorOptions options;
    options.database_url = db_->url();
    options.migrations = std::move(migrations);
    options.on_progress = [this](absl::string_view event) {
      absl::MutexLock lock(&progress_mu_);
      progress_.emplace_back(event);
    };
    if (adjust) adjust(options);
    absl::StatusOr<std::unique_ptr<Migrator>> migrator =
        Migrator::Create(std::move(options));
    EXPECT_OK(migrator);
    return migrator.ok() ? *std::move(migrator) : nullptr;
  }

  std::string Query(const std::string& sql) {
    pqxx::connection conn(db_->url());
    pqxx::nontransaction tx(conn);
    pqxx::result r = tx.exec(sql);
    return r.empty() || r[0][0].is_null() ? "" : r[0][0].as<std::string>();
  }

  // Runs metricsctl against the test database and returns its exit code.
  struct Run {
    int code = -1;
    std::string out;
    std::string err;
  };
  Run Metricsctl(std::vector<std::string> args) {
    std::vector<std::string> argv = {METRICSCTL_PATH};
    argv.insert(argv.end(), args.begin(), args.end());
    Run run;
    absl::StatusOr<std::unique_ptr<Subprocess>> p = Subprocess::Start(
        argv, {absl::StrCat("DATABASE_URL=", db_->url())});
    EXPECT_OK(p);
    if (!p.ok()) return run;
    absl::StatusOr<int> code = (*p)->Wait(absl::Seconds(60));
    EXPECT_OK(code);
    run.code = code.ok() ? *code : -1;
    run.out = (*p)->stdout_text();
    run.err = (*p)->stderr_text();
    return run;
  }

  // A copy of migrations/sql plus a second migration, in a temp directory.
  std::string MigrationsDirWithExtra() {
    const std::filesystem::path dir =
        std::filesystem::path(::testing::TempDir()) /
        absl::StrCat("migrations_", db_->name());
    std::filesystem::remove_all(dir);
    std::filesystem::create_directories(dir);
    for (const auto& entry :
         std::filesystem::directory_iterator(MIGRATIONS_SQL_DIR)) {
      std::filesystem::copy_file(entry.path(), dir / entry.path().filename());
    }
    std::ofstream(dir / "0900_extra.up.sql") << "CREATE TABLE extra (x int);\n";
    std::ofstream(dir / "0900_extra.down.sql") << "DROP TABLE extra;\n";
    return dir.string();
  }

  // Every progress event of the migrators NewMigrator made, one per line.
  std::string Progress() {
    absl::MutexLock lock(&progress_mu_);
    return absl::StrJoin(progress_, "\n");
  }

  std::unique_ptr<TestDatabase> db_;
  absl::Mutex progress_mu_;
  std::vector<std::string> progress_ ABSL_GUARDED_BY(progress_mu_);
};

// The embedded migrations and 0900_steps with `up` as its up file.
std::vector<Migration> WithSteps(const std::string& up) {
  absl::StatusOr<std::vector<Migration>> extra = BuildMigrations(
      {{"0900_steps.up.sql", up},
       {"0900_steps.down.sql", "DROP TABLE t; DROP TABLE step_log;"}});
  EXPECT_OK(extra);
  std::vector<Migration> all = EmbeddedMigrations();
  if (extra.ok()) all.push_back((*extra)[0]);
  return all;
}

// A table whose unique index fails to build until its duplicates are gone,
// then a rewrite of every row in batches of 100.
constexpr char kSteppedUp[] = R"sql(-- Three steps.
-- migrate:step create and fill t
CREATE TABLE t (id int PRIMARY KEY, c int,
                done boolean NOT NULL DEFAULT false);
INSERT INTO t (id, c) SELECT g, g % 3 FROM generate_series(1, 1000) g;
CREATE TABLE step_log (step text);
INSERT INTO step_log VALUES ('create and fill t');
-- migrate:step-outside-transaction unique index on c
CREATE UNIQUE INDEX CONCURRENTLY t_c ON t (c);
-- migrate:step-repeated mark every row, 100 at a time
UPDATE t SET done = true
 WHERE id IN (SELECT id FROM t WHERE NOT done ORDER BY id LIMIT 100);
)sql";

TEST_F(MigratorTest, UpCreatesTheSchemaOfTheDesign) {
  std::unique_ptr<Migrator> migrator = NewMigrator();
  ASSERT_NE(migrator, nullptr);
  ASSERT_OK_AND_ASSIGN(std::vector<MigrationState> applied, migrator->Up());
  ASSERT_EQ(applied.size(), EmbeddedMigrations().size());

  const std::string catalog = Query(kCatalogQuery);
  for (const char* partition : {"TRAINING", "VALIDATION", "GENERIC",
                                "PROFILING"}) {
    EXPECT_THAT(catalog, ContainsRegex(absl::StrCat(
                             "partition metrics_[a-z]+ of metrics FOR VALUES "
                             "IN \\('",
                             partition, "'\\)")));
  }
  // trial_id leads the primary key of every per-trial table, and the
  // indexes of each partition of metrics (which has no primary key since
  // 0004).
  for (const char* table : {"series", "system_rollups", "ingest_positions"}) {
    EXPECT_THAT(catalog, ContainsRegex(absl::StrCat(
                             "constraint ", table,
                             " [a-z_]+ PRIMARY KEY \\(trial_id")))
        << table;
  }
  for (const char* partition : {"training", "validation", "generic",
                                "profiling"}) {
    EXPECT_THAT(catalog, ContainsRegex(absl::StrCat(
                             "INDEX [a-z_]+ ON public.metrics_", partition,
                             " USING btree \\(trial_id")))
        << partition;
  }
  EXPECT_THAT(catalog,
              HasSubstr("USING gin (labels)"));  // the legacy table's index
  EXPECT_EQ(Query("SELECT count(*) FROM pg_constraint WHERE contype = 'f'"),
            "0");
}

TEST_F(MigratorTest, UpDownUpLeavesTheSameSchema) {
  std::unique_ptr<Migrator> migrator = NewMigrator();
  ASSERT_NE(migrator, nullptr);
  ASSERT_OK(migrator->Up());
  const std::string first = Query(kCatalogQuery);

  ASSERT_OK_AND_ASSIGN(std::vector<MigrationState> reverted,
                       migrator->Down(0));
  EXPECT_EQ(reverted.size(), EmbeddedMigrations().size());
  // Only the bookkeeping tables are left.
  EXPECT_EQ(Query("SELECT string_agg(tablename, ',' ORDER BY tablename) "
                  "FROM pg_tables WHERE schemaname = 'public'"),
            "schema_migration_steps,schema_migrations");
  EXPECT_EQ(Query("SELECT count(*) FROM schema_migrations"), "0");

  ASSERT_OK(migrator->Up());
  EXPECT_EQ(Query(kCatalogQuery), first);
}

TEST_F(MigratorTest, UpToAndDownWithoutToMoveOneStepAtATime) {
  const std::string dir = MigrationsDirWithExtra();
  ASSERT_OK_AND_ASSIGN(std::vector<Migration> migrations,
                       LoadMigrationsFromDir(dir));
  std::unique_ptr<Migrator> migrator = NewMigrator(migrations);
  ASSERT_NE(migrator, nullptr);

  ASSERT_OK_AND_ASSIGN(auto applied, migrator->Up(1));
  ASSERT_EQ(applied.size(), 1u);
  EXPECT_EQ(Query("SELECT to_regclass('extra')"), "");
  ASSERT_OK_AND_ASSIGN(applied, migrator->Up());
  ASSERT_EQ(applied.size(), migrations.size() - 1);
  EXPECT_EQ(applied.back().version, 900);
  EXPECT_EQ(Query("SELECT to_regclass('extra')"), "extra");

  ASSERT_OK_AND_ASSIGN(auto reverted, migrator->Down());
  ASSERT_EQ(reverted.size(), 1u);
  EXPECT_EQ(reverted[0].version, 900);
  EXPECT_EQ(Query("SELECT to_regclass('extra')"), "");
  EXPECT_EQ(Query("SELECT to_regclass('metrics')"), "metrics");

  EXPECT_THAT(migrator->Up(77), StatusIs(absl::StatusCode::kInvalidArgument,
                                        HasSubstr("--to 77")));
}

TEST_F(MigratorTest, FailedMigrationLeavesNothingBehind) {
  std::vector<Migration> migrations = EmbeddedMigrations();
  Migration broken;
  broken.version = 900;
  broken.name = "broken";
  broken.up_sql = "CREATE TABLE half (x int); SELECT no_such_function();";
  broken.down_sql = "DROP TABLE half;";
  broken.checksum = Sha256Hex(broken.up_sql);
  migrations.push_back(broken);
  std::unique_ptr<Migrator> migrator = NewMigrator(migrations);
  ASSERT_NE(migrator, nullptr);

  EXPECT_THAT(migrator->Up(),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       AllOf(HasSubstr("applying migration 0900_broken"),
                             HasSubstr("no_such_function"))));
  EXPECT_EQ(Query("SELECT to_regclass('half')"), "");
  // Everything before the broken migration stays applied.
  EXPECT_EQ(Query("SELECT count(*) FROM schema_migrations"),
            std::to_string(EmbeddedMigrations().size()));
  EXPECT_EQ(Query("SELECT count(*) FROM schema_migrations WHERE version = 900"),
            "0");
}

TEST_F(MigratorTest, StepsResumeAtTheOneThatFailed) {
  std::unique_ptr<Migrator> migrator = NewMigrator(WithSteps(kSteppedUp));
  ASSERT_NE(migrator, nullptr);
  EXPECT_THAT(migrator->Up(),
              StatusIs(absl::StatusCode::kAlreadyExists,
                       HasSubstr("applying migration 0900_steps step 2 "
                                 "(unique index on c)")));
  // The failed concurrent build left its index behind, invalid.
  EXPECT_EQ(Query("SELECT indisvalid FROM pg_index "
                  "WHERE indexrelid = 't_c'::regclass"),
            "f");
  ASSERT_OK_AND_ASSIGN(std::vector<MigrationState> states, migrator->Status());
  EXPECT_EQ(states.back().version, 900);
  EXPECT_EQ(states.back().state, MigrationState::State::kPending);
  EXPECT_EQ(states.back().steps_done, 1);
  EXPECT_EQ(states.back().steps, 3);
  EXPECT_THAT(migrator->Down(),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("0900_steps is partly applied (1 of 3 steps "
                                 "done); run \"metricsctl migrate up\"")));

  Query("UPDATE t SET c = id");
  ASSERT_OK_AND_ASSIGN(std::vector<MigrationState> applied, migrator->Up());
  ASSERT_EQ(applied.size(), 1u);
  EXPECT_EQ(applied[0].version, 900);
  EXPECT_THAT(Progress(),
              AllOf(HasSubstr("resuming 0900_steps at step 2 of 3"),
                    HasSubstr("dropping the invalid index t_c")));
  EXPECT_EQ(Query("SELECT count(*) FROM step_log"), "1");  // not run again
  EXPECT_EQ(Query("SELECT indisvalid FROM pg_index "
                  "WHERE indexrelid = 't_c'::regclass"),
            "t");
  EXPECT_EQ(Query("SELECT count(*) FROM t WHERE done"), "1000");
  // One transaction per batch of 100.
  EXPECT_EQ(Query("SELECT count(DISTINCT xmin::text) FROM t"), "10");
  EXPECT_EQ(Query("SELECT count(*) FROM schema_migration_steps"), "0");
  EXPECT_EQ(Query("SELECT checksum FROM schema_migrations WHERE version = 900"),
            Sha256Hex(kSteppedUp));
}

TEST_F(MigratorTest, AnIndexBuiltAfterItsRunnerDiedIsNotBuiltAgain) {
  std::unique_ptr<Migrator> migrator = NewMigrator(WithSteps(kSteppedUp));
  ASSERT_NE(migrator, nullptr);
  ASSERT_THAT(migrator->Up(), StatusIs(absl::StatusCode::kAlreadyExists));
  // What a runner killed while the server finished its build leaves: a
  // valid index, its step not recorded.
  Query("DROP INDEX t_c");
  Query("UPDATE t SET c = id");
  Query("CREATE UNIQUE INDEX t_c ON t (c)");
  const std::string oid = Query("SELECT 't_c'::regclass::oid");
  ASSERT_OK(migrator->Up());
  EXPECT_THAT(Progress(), HasSubstr("index t_c is built already"));
  EXPECT_EQ(Query("SELECT 't_c'::regclass::oid"), oid);
}

TEST_F(MigratorTest, PartlyAppliedStepsOfAnotherTextAreRefused) {
  std::unique_ptr<Migrator> first = NewMigrator(WithSteps(kSteppedUp));
  ASSERT_NE(first, nullptr);
  ASSERT_THAT(first->Up(), StatusIs(absl::StatusCode::kAlreadyExists));
  std::unique_ptr<Migrator> changed =
      NewMigrator(WithSteps(absl::StrCat(kSteppedUp, "-- an edit\n")));
  ASSERT_NE(changed, nullptr);
  EXPECT_THAT(changed->Up(),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("0900_steps is partly applied (1 step(s) "
                                 "done) from another text of its file")));
  ASSERT_OK_AND_ASSIGN(std::vector<MigrationState> states, changed->Status());
  EXPECT_EQ(states.back().state, MigrationState::State::kChanged);
}

TEST_F(MigratorTest, AnEarlierTextTheFileAcceptsCountsAsApplied) {
  const std::string earlier = "CREATE TABLE t (id int);\n";
  ASSERT_OK(NewMigrator(WithSteps(earlier))->Up());
  std::unique_ptr<Migrator> later = NewMigrator(WithSteps(absl::StrCat(
      "-- migrate:accepts-checksum ", Sha256Hex(earlier), "\n", earlier,
      "-- the same table, said differently\n")));
  ASSERT_NE(later, nullptr);
  ASSERT_OK_AND_ASSIGN(std::vector<MigrationState> states, later->Status());
  EXPECT_EQ(states.back().state, MigrationState::State::kApplied);
  ASSERT_OK_AND_ASSIGN(std::vector<MigrationState> applied, later->Up());
  EXPECT_THAT(applied, IsEmpty());
  // Without the directive the same text is a changed file.
  ASSERT_OK_AND_ASSIGN(
      states, NewMigrator(WithSteps(absl::StrCat(earlier, "-- edit\n")))
                  ->Status());
  EXPECT_EQ(states.back().state, MigrationState::State::kChanged);
}

TEST_F(MigratorTest, ADatabaseMigratedByTheOneTransactionTextOf0004IsCurrent) {
  ASSERT_OK(NewMigrator()->Up());
  // The SHA-256 that text recorded.
  Query("UPDATE schema_migrations SET checksum = "
        "'fe0845eeb29af0cd45b2ade39ef206acc95ceee7fd23280a0c8eae7d8bd3f343' "
        "WHERE version = 4");
  ASSERT_OK_AND_ASSIGN(std::vector<MigrationState> states,
                       NewMigrator()->Status());
  for (const MigrationState& s : states) {
    EXPECT_EQ(s.state, MigrationState::State::kApplied) << s.version;
  }
}

// A session that holds a lock the step needs (here a long read of the
// table): the step gives up its place in the lock queue after lock_timeout,
// so writes to the table wait no longer than that, and retries until the
// lock is free.
TEST_F(MigratorTest, AStepWaitingForALockHoldsWritesUpOnlyBriefly) {
  ASSERT_OK(NewMigrator()->Up());
  std::unique_ptr<Migrator> migrator = NewMigrator(
      WithSteps("-- migrate:step add a column\n"
                "ALTER TABLE ingest_positions ADD COLUMN x int;\n"),
      [](MigratorOptions& o) { o.lock_timeout = absl::Milliseconds(100); });
  ASSERT_NE(migrator, nullptr);
  pqxx::connection reader_conn(db_->url());
  pqxx::work reader(reader_conn);
  reader.exec("SELECT count(*) FROM ingest_positions");

  absl::StatusOr<std::vector<MigrationState>> result;
  std::thread up([&] { result = migrator->Up(); });
  pqxx::connection writer(db_->url());
  absl::Duration worst;
  int writes = 0;
  for (absl::Time end = absl::Now() + absl::Seconds(2); absl::Now() < end;) {
    const absl::Time start = absl::Now();
    pqxx::nontransaction(writer).exec_params(
        "INSERT INTO ingest_positions (trial_id, stream_id, last_sequence) "
        "VALUES (1, $1, 0)",
        std::to_string(writes++));
    worst = std::max(worst, absl::Now() - start);
  }
  reader.commit();
  up.join();
  ASSERT_OK(result);
  EXPECT_THAT(Progress(),
              HasSubstr("step 1: its locks were not free within 100ms"));
  EXPECT_LT(worst, absl::Milliseconds(600)) << "over " << writes << " writes";
  EXPECT_EQ(Query("SELECT count(*) FROM information_schema.columns "
                  "WHERE table_name = 'ingest_positions' AND column_name = 'x'"),
            "1");
}

TEST_F(MigratorTest, AStepGivesUpAfterTheLockWaitLimit) {
  ASSERT_OK(NewMigrator()->Up());
  std::unique_ptr<Migrator> migrator = NewMigrator(
      WithSteps("-- migrate:step add a column\n"
                "ALTER TABLE ingest_positions ADD COLUMN x int;\n"),
      [](MigratorOptions& o) {
        o.lock_timeout = absl::Milliseconds(50);
        o.lock_wait_limit = absl::Milliseconds(800);
      });
  ASSERT_NE(migrator, nullptr);
  pqxx::connection reader_conn(db_->url());
  pqxx::work reader(reader_conn);
  reader.exec("SELECT count(*) FROM ingest_positions");
  EXPECT_THAT(migrator->Up(),
              StatusIs(absl::StatusCode::kAborted,
                       AllOf(HasSubstr("0900_steps step 1 (add a column)"),
                             HasSubstr("other sessions kept conflicting locks "
                                       "for 800ms"))));
}

TEST_F(MigratorTest, StatusBeforeAndAfterUp) {
  Run before = Metricsctl({"migrate", "status"});
  EXPECT_EQ(before.code, 0) << before.err;
  EXPECT_THAT(before.out, ContainsRegex("0001 +init +pending +-"));
  const size_t n = EmbeddedMigrations().size();
  EXPECT_THAT(before.out, HasSubstr(absl::StrCat("0 applied, ", n, " pending")));

  Run up = Metricsctl({"migrate", "up"});
  EXPECT_EQ(up.code, 0) << up.err;
  EXPECT_THAT(up.out, ContainsRegex("applied 0001_init \\([0-9]+ ms\\)"));

  Run after = Metricsctl({"migrate", "status"});
  EXPECT_EQ(after.code, 0) << after.err;
  EXPECT_THAT(after.out,
              ContainsRegex("0001 +init +applied +20[0-9-]+ [0-9:]+ UTC"));
  EXPECT_THAT(after.out, HasSubstr(absl::StrCat(n, " applied, 0 pending")));

  Run again = Metricsctl({"migrate", "up"});
  EXPECT_EQ(again.code, 0) << again.err;
  EXPECT_THAT(again.out, HasSubstr("nothing to apply"));
}

TEST_F(MigratorTest, TwoConcurrentUpsApplyEachMigrationOnce) {
  // Hold the migration lock so both runs are certainly waiting at once, then
  // let them race for it.
  pqxx::connection holder(db_->url());
  pqxx::nontransaction hold(holder);
  hold.exec(absl::StrCat("SELECT pg_advisory_lock(", kMigrationLockKey, ")"));

  std::vector<std::unique_ptr<Subprocess>> runs;
  for (int i = 0; i < 2; ++i) {
    ASSERT_OK_AND_ASSIGN(
        auto p, Subprocess::Start({METRICSCTL_PATH, "migrate", "up"},
                                  {absl::StrCat("DATABASE_URL=", db_->url())}));
    runs.push_back(std::move(p));
  }
  for (auto& run : runs) {
    ASSERT_OK(run->WaitForLine("waiting for another migration run",
                               absl::Seconds(30)));
  }
  hold.exec(absl::StrCat("SELECT pg_advisory_unlock(", kMigrationLockKey, ")"));

  int applied = 0, idle = 0;
  for (auto& run : runs) {
    ASSERT_OK_AND_ASSIGN(int code, run->Wait(absl::Seconds(60)));
    EXPECT_EQ(code, 0) << run->stderr_text();
    applied += run->stdout_text().find("applied 0001_init") != std::string::npos;
    idle += run->stdout_text().find("nothing to apply") != std::string::npos;
  }
  EXPECT_EQ(applied, 1);
  EXPECT_EQ(idle, 1);
  EXPECT_EQ(Query("SELECT count(*) FROM schema_migrations"),
            std::to_string(EmbeddedMigrations().size()));
}

TEST_F(MigratorTest, ChangedMigrationFileIsRefusedByName) {
  const std::string dir = MigrationsDirWithExtra();
  Run up = Metricsctl({"migrate", "up", "--migrations-dir", dir});
  ASSERT_EQ(up.code, 0) << up.err;

  std::ofstream(std::filesystem::path(dir) / "0001_init.up.sql",
                std::ios::app)
      << "-- edited after it was applied\n";
  Run again = Metricsctl({"--migrations-dir=" + dir, "migrate", "up"});
  EXPECT_EQ(again.code, 1);
  EXPECT_THAT(again.err,
              HasSubstr("metricsctl: error: migration 0001_init was changed "
                        "after it was applied"));

  Run down = Metricsctl({"migrate", "down", "--migrations-dir", dir});
  EXPECT_EQ(down.code, 1);
  EXPECT_EQ(Query("SELECT to_regclass('extra')"), "extra");

  Run status = Metricsctl({"migrate", "status", "--migrations-dir", dir});
  EXPECT_EQ(status.code, 1);
  EXPECT_THAT(status.out, ContainsRegex("0001 +init +CHANGED"));
}

TEST_F(MigratorTest, MigrationAppliedByANewerReleaseIsRefused) {
  const std::string dir = MigrationsDirWithExtra();
  ASSERT_EQ(Metricsctl({"migrate", "up", "--migrations-dir", dir}).code, 0);

  Run embedded_only = Metricsctl({"migrate", "up"});
  EXPECT_EQ(embedded_only.code, 1);
  EXPECT_THAT(embedded_only.err,
              HasSubstr("the database has migration 0900_extra applied, "
                        "which these migrations do not include"));
  Run status = Metricsctl({"migrate", "status"});
  EXPECT_THAT(status.out, ContainsRegex("0900 +extra +UNKNOWN"));
}

TEST_F(MigratorTest, UnreachableDatabaseIsOneLineNamingHostAndPort) {
  Run run = Metricsctl({"migrate", "status", "--database-url",
                        "host=127.0.0.1 port=1 connect_timeout=5"});
  EXPECT_EQ(run.code, 1);
  EXPECT_THAT(run.err, AllOf(HasSubstr("metricsctl: error: connecting to "
                                       "PostgreSQL:"),
                             HasSubstr("\"127.0.0.1\", port 1 failed")));
  EXPECT_EQ(std::count(run.err.begin(), run.err.end(), '\n'), 1) << run.err;
}

TEST_F(MigratorTest, MissingPrivilegeSaysPermissionDenied) {
  const std::string role = absl::StrCat(db_->name(), "_limited");
  Query(absl::StrCat("CREATE ROLE ", role, " LOGIN PASSWORD 'limited'"));
  Run run = Metricsctl({"migrate", "up", "--database-url",
                        absl::StrCat(db_->url(), " user=", role,
                                     " password=limited")});
  Query(absl::StrCat("DROP ROLE ", role));
  EXPECT_EQ(run.code, 1);
  EXPECT_THAT(run.err, HasSubstr("permission denied"));
  EXPECT_EQ(std::count(run.err.begin(), run.err.end(), '\n'), 1) << run.err;
}

TEST_F(MigratorTest, HelpAndUsageErrors) {
  for (const std::vector<std::string>& args :
       std::vector<std::vector<std::string>>{{"--help"},
                                             {"migrate", "--help"},
                                             {"migrate", "up", "--help"},
                                             {"migrate", "down", "-h"},
                                             {"migrate", "status", "--help"}}) {
    Run run = Metricsctl(args);
    EXPECT_EQ(run.code, 0) << absl::StrJoin(args, " ");
    EXPECT_THAT(run.out, HasSubstr("Usage: metricsctl"));
  }
  Run bad = Metricsctl({"migrate", "sideways"});
  EXPECT_EQ(bad.code, 2);
  EXPECT_THAT(bad.err, HasSubstr("unknown command \"migrate sideways\""));
  Run bad_to = Metricsctl({"migrate", "up", "--to", "x"});
  EXPECT_EQ(bad_to.code, 2);
  EXPECT_THAT(bad_to.err, HasSubstr("--to x"));
  Run bad_timeout = Metricsctl({"migrate", "up", "--lock-timeout=5"});
  EXPECT_EQ(bad_timeout.code, 2);
  EXPECT_THAT(bad_timeout.err,
              HasSubstr("--lock-timeout 5: must be a duration from 1ms to 1h"));
  Run timeout_elsewhere =
      Metricsctl({"migrate", "status", "--lock-timeout=1s"});
  EXPECT_EQ(timeout_elsewhere.code, 2);
  EXPECT_THAT(timeout_elsewhere.err,
              HasSubstr("--lock-timeout applies to \"migrate up\" only"));
  EXPECT_THAT(Metricsctl({"migrate", "up", "--help"}).out,
              HasSubstr("--lock-timeout DURATION"));
  EXPECT_THAT(Query("SELECT to_regclass('schema_migrations')"), IsEmpty());
}

}  // namespace
}  // namespace metrics::migrations
