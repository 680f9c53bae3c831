#include "migrations/migration.h"

#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace metrics::migrations {
namespace {

using ::metrics::test_util::StatusIs;
using ::testing::HasSubstr;

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

TEST(MigrationTest, MissingDirectoryIsNotFound) {
  EXPECT_THAT(LoadMigrationsFromDir("/nonexistent/migrations"),
              StatusIs(absl::StatusCode::kNotFound,
                       HasSubstr("/nonexistent/migrations")));
}

}  // namespace
}  // namespace metrics::migrations
