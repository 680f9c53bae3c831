#include "migrations/migration.h"

#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace metrics::migrations {
namespace {

using ::metrics::test_util::StatusIs;
using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

TEST(MigrationTest, EmbeddedMigrationsAreTheFilesOfTheSqlDirectory) {
  ASSERT_OK_AND_ASSIGN(std::vector<Migration> from_dir,
                       LoadMigrationsFromDir(MIGRATIONS_SQL_DIR));
  const std::vector<Migration>& embedded = EmbeddedMigrations();
  ASSERT_EQ(embedded.size(), from_dir.size());
  ASSERT_FALSE(embedded.empty());
  for (size_t i = 0; i < embedded.size(); ++i) {
    EXPECT_EQ(embedded[i].version, from_dir[i].version);
    EXPECT_EQ(embedded[i].name, from_dir[i].name);
    EXPECT_EQ(embedded[i].up_sql, from_dir[i].up_sql);
    EXPECT_EQ(embedded[i].down_sql, from_dir[i].down_sql);
    EXPECT_EQ(embedded[i].checksum, from_dir[i].checksum);
  }
  EXPECT_EQ(embedded[0].version, 1);
  EXPECT_EQ(embedded[0].name, "init");
}

TEST(MigrationTest, PairsFilesAndSortsByVersion) {
  ASSERT_OK_AND_ASSIGN(
      std::vector<Migration> migrations,
      BuildMigrations({{"0002_b.up.sql", "B"},
                       {"0001_a.down.sql", "drop a"},
                       {"0002_b.down.sql", "drop b"},
                       {"0001_a.up.sql", "A"}}));
  ASSERT_EQ(migrations.size(), 2u);
  EXPECT_EQ(migrations[0].version, 1);
  EXPECT_EQ(migrations[0].up_sql, "A");
  EXPECT_EQ(migrations[0].down_sql, "drop a");
  EXPECT_EQ(migrations[1].name, "b");
  EXPECT_EQ(migrations[1].checksum, Sha256Hex("B"));
}

TEST(MigrationTest, ChecksumIsSha256OfTheUpFile) {
  EXPECT_EQ(Sha256Hex("abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

TEST(MigrationTest, RejectsBadSetsNamingTheFile) {
  EXPECT_THAT(BuildMigrations({{"init.up.sql", ""}}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("\"init.up.sql\"")));
  EXPECT_THAT(BuildMigrations({{"0001_a.sql", ""}}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("\"0001_a.sql\"")));
  EXPECT_THAT(BuildMigrations({{"0000_zero.up.sql", ""},
                               {"0000_zero.down.sql", ""}}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("positive")));
  EXPECT_THAT(BuildMigrations({{"0001_a.up.sql", ""}}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("\"0001_a.up.sql\" has no .down.sql")));
  EXPECT_THAT(BuildMigrations({{"0001_a.up.sql", ""},
                               {"0001_a.down.sql", ""},
                               {"0001_b.up.sql", ""}}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("version 1 is used by another file")));
}

TEST(MigrationTest, AFileWithoutStepsIsOneStepInATransaction) {
  ASSERT_OK_AND_ASSIGN(std::vector<Migration> migrations,
                       BuildMigrations({{"0001_a.up.sql", "CREATE TABLE a ();\n"},
                                        {"0001_a.down.sql", "DROP TABLE a;"}}));
  ASSERT_EQ(migrations[0].up_steps.size(), 1u);
  EXPECT_EQ(migrations[0].up_steps[0].kind, MigrationStep::Kind::kTransaction);
  EXPECT_EQ(migrations[0].up_steps[0].sql, "CREATE TABLE a ();\n");
  EXPECT_THAT(migrations[0].accepted_checksums, IsEmpty());
}

TEST(MigrationTest, StepLinesCutAnUpFile) {
  const std::string up =
      "-- Why this migration.\n"
      "-- migrate:accepts-checksum " + Sha256Hex("old text") + "\n"
      "\n"
      "-- migrate:step add a column\n"
      "ALTER TABLE t ADD COLUMN c int;\n"
      "-- migrate:step-outside-transaction index it\n"
      "CREATE INDEX CONCURRENTLY t_c ON t (c);\n"
      "-- migrate:step-repeated fill it\n"
      "UPDATE t SET c = 0 WHERE id IN (SELECT id FROM t WHERE c IS NULL LIMIT 10);\n";
  ASSERT_OK_AND_ASSIGN(std::vector<Migration> migrations,
                       BuildMigrations({{"0001_a.up.sql", up},
                                        {"0001_a.down.sql", "DROP TABLE t;"}}));
  const Migration& m = migrations[0];
  EXPECT_EQ(m.checksum, Sha256Hex(up));
  EXPECT_THAT(m.accepted_checksums, ElementsAre(Sha256Hex("old text")));
  ASSERT_EQ(m.up_steps.size(), 3u);
  EXPECT_EQ(m.up_steps[0].kind, MigrationStep::Kind::kTransaction);
  EXPECT_EQ(m.up_steps[0].description, "add a column");
  EXPECT_EQ(m.up_steps[0].sql, "ALTER TABLE t ADD COLUMN c int;\n");
  EXPECT_EQ(m.up_steps[1].kind, MigrationStep::Kind::kOutsideTransaction);
  EXPECT_EQ(m.up_steps[1].sql, "CREATE INDEX CONCURRENTLY t_c ON t (c);\n");
  EXPECT_EQ(m.up_steps[2].kind, MigrationStep::Kind::kRepeated);
  EXPECT_EQ(m.up_steps[2].description, "fill it");
}

TEST(MigrationTest, BadDirectivesAreRefusedNamingFileAndLine) {
  auto build = [](const std::string& up, const std::string& down = "") {
    return BuildMigrations({{"0001_a.up.sql", up}, {"0001_a.down.sql", down}});
  };
  EXPECT_THAT(build("-- migrate:stpe x\nSELECT 1;\n"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("\"0001_a.up.sql\" line 1"),
                             HasSubstr("unknown directive \"stpe\""))));
  EXPECT_THAT(build("-- migrate:step\nSELECT 1;\n"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("line 1: a step needs a description")));
  EXPECT_THAT(build("CREATE TABLE t ();\n-- migrate:step more\nSELECT 1;\n"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("line 2: statements come before the first step")));
  EXPECT_THAT(build("-- migrate:accepts-checksum abc\n"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("line 1: accepts-checksum takes a SHA-256")));
  EXPECT_THAT(build("SELECT 1;", "DROP TABLE t;\n-- migrate:step x\n"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("\"0001_a.down.sql\" line 2"),
                             HasSubstr("takes no directives"))));
}

TEST(MigrationTest, MissingDirectoryIsNotFound) {
  EXPECT_THAT(LoadMigrationsFromDir("/nonexistent/migrations"),
              StatusIs(absl::StatusCode::kNotFound,
                       HasSubstr("/nonexistent/migrations")));
}

}  // namespace
}  // namespace metrics::migrations
