#include "tests/testing/test_database.h"

#include <unistd.h>

#include <cstdlib>
#include <iostream>
#include <random>

#include "absl/strings/str_cat.h"
#include "common/database_url.h"
#include "common/status_macros.h"
#include "migrations/database_admin.h"
#include "migrations/migrator.h"

namespace metrics::test_util {

absl::StatusOr<std::unique_ptr<TestDatabase>> TestDatabase::Create(
    TestDatabaseOptions options) {
  std::random_device random;
  const std::string name = absl::StrCat("metrics_test_", ::getpid(), "_",
                                        random() % 1000000000u);
  const std::string server = common::ResolveDatabaseUrl("");
  if (absl::Status created = migrations::CreateDatabase(server, name);
      !created.ok()) {
    return absl::Status(
        created.code(),
        absl::StrCat(created.message(),
                     " (database tests need a PostgreSQL server named by the "
                     "PG* variables: run them under pg_virtualenv, as the "
                     "README's test command does)"));
  }
  std::unique_ptr<TestDatabase> db(
      new TestDatabase(name, migrations::UrlForDatabase(server, name)));
  if (options.migrate) {
    migrations::MigratorOptions migrator_options;
    migrator_options.database_url = db->url();
    ASSIGN_OR_RETURN(auto migrator,
                     migrations::Migrator::Create(std::move(migrator_options)));
    RETURN_IF_ERROR(migrator->Up().status());
  }
  return db;
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
