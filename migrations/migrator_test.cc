// Tests of the migrator and of metricsctl's migrate commands against a real
// PostgreSQL, each test on a fresh, empty database of its own.
#include "migrations/migrator.h"

#include <pqxx/connection>
#include <pqxx/nontransaction>
#include <pqxx/result>

#include <filesystem>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "common/testing/eventually.h"
#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "migrations/database_admin.h"
#include "tests/testing/subprocess.h"
#include "tests/testing/test_database.h"

namespace metrics::migrations {
namespace {

using ::metrics::test_util::StatusIs;
using ::metrics::test_util::Subprocess;
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
      std::vector<Migration> migrations = EmbeddedMigrations()) {
    MigratorOptions options;
    options.database_url = db_->url();
    options.migrations = std::move(migrations);
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

  std::unique_ptr<TestDatabase> db_;
};

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
  // Only the bookkeeping table is left.
  EXPECT_EQ(Query("SELECT string_agg(tablename, ',') FROM pg_tables "
                  "WHERE schemaname = 'public'"),
            "schema_migrations");
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

  EXPECT_THAT(migrator->Up(7), StatusIs(absl::StatusCode::kInvalidArgument,
                                        HasSubstr("--to 7")));
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
  ASSERT_TRUE(test_util::Eventually(
      [&] {
        return Query("SELECT count(*) FROM pg_locks WHERE locktype = "
                     "'advisory' AND NOT granted") == "2";
      },
      absl::Seconds(30)))
      << "both runs never blocked on the lock";
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
  EXPECT_THAT(Query("SELECT to_regclass('schema_migrations')"), IsEmpty());
}

}  // namespace
}  // namespace metrics::migrations
