#include <cstdlib>

#include "common/logging.h"
#include "migrations/embedded_files.h"
#include "migrations/migration.h"

namespace metrics::migrations {

const std::vector<Migration>& EmbeddedMigrations() {
  static const std::vector<Migration>* const migrations = [] {
    std::vector<MigrationFile> files;
    for (int i = 0; i < migrations_internal::kEmbeddedFileCount; ++i) {
      files.push_back({migrations_internal::kEmbeddedFiles[i].file_name,
                       migrations_internal::kEmbeddedFiles[i].contents});
    }
    absl::StatusOr<std::vector<Migration>> built =
        BuildMigrations(std::move(files));
    if (!built.ok()) {
      // The files were checked into this build; a bad set is our bug.
      common::LogError("embedded migrations are broken: ",
                       built.status().ToString());
      std::abort();
    }
    return new std::vector<Migration>(*std::move(built));
  }();
  return *migrations;
}

}  // namespace metrics::migrations
