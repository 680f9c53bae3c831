// A migration: one numbered schema change with its up and down SQL, as read
// from a pair of files "NNNN_name.up.sql" and "NNNN_name.down.sql".
//
// An up file runs in one transaction unless it is cut into steps by lines
// that begin with a directive, so that a change to a large table can run
// while the platform writes to it (docs/operating.md, "Upgrades"):
//   -- migrate:step DESCRIPTION
//       what follows runs in its own transaction
//   -- migrate:step-outside-transaction DESCRIPTION
//       one statement run on its own, for those that cannot run in a
//       transaction block (CREATE INDEX CONCURRENTLY) or should not hold one
//       open (ALTER TABLE ... VALIDATE CONSTRAINT)
//   -- migrate:step-repeated DESCRIPTION
//       runs in its own transaction again and again until its last statement
//       changes no row: a rewrite of rows in bounded batches
//   -- migrate:accepts-checksum HEX
//       an earlier text of this up file (its SHA-256) that a database may have
//       recorded as applied: it left the schema this text leaves
// Only comments may come before the first step. Down files take no
// directives: they run in one transaction.
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

struct MigrationStep {
  enum class Kind { kTransaction, kOutsideTransaction, kRepeated };
  Kind kind = Kind::kTransaction;
  std::string description;  // the rest of the step's line; "" for a whole file
  std::string sql;
};

struct Migration {
  int version = 0;       // from the file name's leading number; unique, > 0
  std::string name;      // the rest of the file name ("init")
  std::string up_sql;
  std::string down_sql;
  std::string checksum;  // hex SHA-256 of up_sql: what the database records
  // up_sql cut at its step lines; one kTransaction step for a file without.
  std::vector<MigrationStep> up_steps;
  // From "-- migrate:accepts-checksum" lines, lower-case hex.
  std::vector<std::string> accepted_checksums;
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
// "NNNN_name.down.sql", a version used twice, an up without its down (or
// the reverse), and naming the file and line for a directive that is unknown,
// malformed, in a down file, or preceded by a statement before the first step.
absl::StatusOr<std::vector<Migration>> BuildMigrations(
    std::vector<MigrationFile> files);

// Reads every *.sql file of `dir`. NOT_FOUND if the directory cannot be read.
absl::StatusOr<std::vector<Migration>> LoadMigrationsFromDir(
    const std::string& dir);

// The migrations compiled into this binary from migrations/sql/.
const std::vector<Migration>& EmbeddedMigrations();

}  // namespace metrics::migrations

#endif  // METRICS_MIGRATIONS_MIGRATION_H_
