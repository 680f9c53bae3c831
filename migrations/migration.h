// A migration: one numbered schema change with its up and down SQL, as read
// from a pair of files "NNNN_name.up.sql" and "NNNN_name.down.sql".
// Migrations are built into the binaries (EmbeddedMigrations) so a deployed
// metricsd or metricsctl needs no files beside it; LoadMigrationsFromDir
// reads a directory instead, for operators and tests.
//
// Thread-safety: values; the functions are thread-safe.
#ifndef METRICS_MIGRATIONS_MIGRATION_H_
#define METRICS_MIGRATIONS_MIGRATION_H_

#include <string>
#include "absl/strings/string_view.h"
#include <vector>

#include "absl/status/statusor.h"

namespace metrics::migrations {

struct Migration {
  int version = 0;       // from the file name's leading number; unique, > 0
  std::string name;      // the rest of the file name ("init")
  std::string up_sql;
  std::string down_sql;
  std::string checksum;  // hex SHA-256 of up_sql: what the database records
};

// "0001_init": how messages and tables name a migration.
std::string MigrationLabel(int version, absl::string_view name);

// Hex SHA-256 of `text`.
std::string Sha256Hex(absl::string_view text);

// One file's name and contents, before pairing.
struct MigrationFile {
  std::string file_name;
  std::string contents;
};

// Pairs up/down files into migrations sorted by version. INVALID_ARGUMENT
// naming the file for a name that is not "NNNN_name.up.sql" or
// "NNNN_name.down.sql", a version used twice, or an up without its down (or
// the reverse).
absl::StatusOr<std::vector<Migration>> BuildMigrations(
    std::vector<MigrationFile> files);

// Reads every *.sql file of `dir`. NOT_FOUND if the directory cannot be read.
absl::StatusOr<std::vector<Migration>> LoadMigrationsFromDir(
    const std::string& dir);

// The migrations compiled into this binary from migrations/sql/.
const std::vector<Migration>& EmbeddedMigrations();

}  // namespace metrics::migrations

#endif  // METRICS_MIGRATIONS_MIGRATION_H_
