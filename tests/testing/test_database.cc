#include "tests/testing/test_database.h"

#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <functional>
#include <iostream>
#include <random>

#include "absl/strings/str_cat.h"
#include "migrations/migration.h"
#include "common/database_url.h"
#include "common/status_macros.h"
#include "migrations/database_admin.h"
#include "migrations/migrator.h"

namespace metrics::test_util {

namespace {

// Held while one process makes the migrated template.
constexpr int64_t kTemplateLock = 0x6d74656d706c; // "mtempl"

absl::Status Migrate(const std::string& url) {
  migrations::MigratorOptions options;
  options.database_url = url;
  ASSIGN_OR_RETURN(auto migrator, migrations::Migrator::Create(std::move(options)));
  return migrator->Up().status();
}

// The database every migrated test database is copied from, made on the
// first use on a server: named after the migrations' checksums, so a
// changed or new migration makes a new one.
std::string TemplateName() {
  std::string checksums;
  for (const migrations::Migration& m : migrations::EmbeddedMigrations()) {
    absl::StrAppend(&checksums, m.version, ":", m.checksum, ";");
  }
  return absl::StrCat("metrics_test_template_",
                      absl::Hex(std::hash<std::string>()(checksums)));
}

// Makes the template unless it exists.
absl::Status MakeTemplate(const std::string& server) {
  const std::string name = TemplateName();
  return migrations::WithServerLock(server, kTemplateLock, [&]() -> absl::Status {
    ASSIGN_OR_RETURN(const bool made, migrations::DatabaseExists(server, name));
    if (made) return absl::OkStatus();
    // Built under another name and renamed once whole: a process killed
    // half-way leaves no template that copies would take for a whole one.
    const std::string building = absl::StrCat(name, "_building");
    RETURN_IF_ERROR(migrations::DropDatabase(server, building));
    RETURN_IF_ERROR(migrations::CreateDatabase(server, building));
    RETURN_IF_ERROR(Migrate(migrations::UrlForDatabase(server, building)));
    return migrations::RenameDatabase(server, building, name);
  });
}

// A copy of the template, which is made first if the copy fails for want
// of it: each test's database then costs one connection, not a look for
// the template and a copy.
absl::Status CopyTemplate(const std::string& server, const std::string& name) {
  if (migrations::CopyDatabase(server, name, TemplateName()).ok()) {
    return absl::OkStatus();
  }
  RETURN_IF_ERROR(MakeTemplate(server));
  return migrations::CopyDatabase(server, name, TemplateName());
}

}  // namespace

absl::StatusOr<std::unique_ptr<TestDatabase>> TestDatabase::Create(
    TestDatabaseOptions options) {
  std::random_device random;
  const std::string name = absl::StrCat("metrics_test_", ::getpid(), "_",
                                        random() % 1000000000u);
  const std::string server = common::ResolveDatabaseUrl("");
  // Copying a migrated template takes 0.2 s where migrating took 0.45 s.
  const absl::Status created = options.migrate
                                   ? CopyTemplate(server, name)
                                   : migrations::CreateDatabase(server, name);
  if (!created.ok()) {
    return absl::Status(
        created.code(),
        absl::StrCat(created.message(),
                     " (database tests need a PostgreSQL server named by the "
                     "PG* variables: run them under pg_virtualenv, as the "
                     "README's test command does)"));
  }
  return std::unique_ptr<TestDatabase>(
      new TestDatabase(name, migrations::UrlForDatabase(server, name)));
}

TestDatabase::~TestDatabase() {
  if (std::getenv("METRICS_KEEP_TEST_DB") != nullptr) {
    std::cerr << "keeping test database " << name_ << "\n";
    return;
  }
  absl::Status dropped =
      migrations::DropDatabase(common::ResolveDatabaseUrl(""), name_);
  if (!dropped.ok()) std::cerr << dropped << "\n";
}

}  // namespace metrics::test_util
