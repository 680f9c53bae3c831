// Applies and reverts numbered migrations on a PostgreSQL database and
// reports which are applied. A migration without steps runs in one
// transaction together with its row in schema_migrations (version, name,
// checksum, time applied), so a failed migration leaves nothing behind. A
// migration cut into steps (migration.h) records each step done in
// schema_migration_steps, in the step's own transaction where it has one, and
// a later Up resumes at the first step not done; an index build interrupted
// halfway leaves an invalid index, which the resumed step drops and builds
// again. Up and Down hold a session-level advisory lock (kMigrationLockKey)
// for the whole run: a second runner waits, then finds nothing left to do.
//
// Steps in a transaction wait at most `lock_timeout` for each lock, so that
// the platform's writes never queue long behind a schema change waiting for
// its lock; on timeout the step is rolled back and tried again, with
// backoff, for up to `lock_wait_limit`.
//
// Before changing anything, the migrator compares what the database recorded
// with the migrations it was given and refuses (FAILED_PRECONDITION, naming
// the migration) when a recorded checksum differs from the file's (and from
// the earlier texts the file accepts), when steps were done from another text
// of the file, or when the database has a migration applied that the files
// do not have.
//
// Usage:
//   ASSIGN_OR_RETURN(auto migrator, Migrator::Create({.database_url = url}));
//   ASSIGN_OR_RETURN(std::vector<MigrationState> applied, migrator->Up());
//
// Thread-safety: thread-compatible; a Migrator owns one connection.
#ifndef METRICS_MIGRATIONS_MIGRATOR_H_
#define METRICS_MIGRATIONS_MIGRATOR_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "migrations/migration.h"

namespace metrics::migrations {

// The advisory lock key every migration run takes ("metrics" in ASCII).
inline constexpr int64_t kMigrationLockKey = 0x6d657472696373;

struct MigrationState {
  enum class State {
    kApplied,   // recorded, checksum matches the file
    kPending,   // in the files, not recorded
    kChanged,   // recorded with a checksum other than the file's
    kUnknown,   // recorded, but no file has this version
  };
  int version = 0;
  std::string name;
  State state = State::kPending;
  std::optional<absl::Time> applied_at;      // when recorded
  std::optional<absl::Duration> took;        // for migrations run just now
  // For a pending migration cut into steps: how many are done, of how many.
  int steps_done = 0;
  int steps = 1;
};

absl::string_view StateName(MigrationState::State state);

struct MigratorOptions {
  // libpq connection string; empty means the PG* environment variables.
  std::string database_url;
  // The migrations to compare against and apply. Default: the embedded ones.
  std::vector<Migration> migrations = EmbeddedMigrations();
  // Shown in pg_stat_activity for the migrator's connection.
  std::string application_name = "metricsctl";
  // Called before each migration is applied or reverted, and when the run
  // must wait for another runner's lock. Optional; runs on the caller's thread.
  std::function<void(absl::string_view event)> on_progress;
  // The longest a step in a transaction waits for one lock before it is
  // rolled back and tried again: how long the platform's writes may queue
  // behind it.
  absl::Duration lock_timeout = absl::Milliseconds(200);
  // How long such retries go on before Up gives up (ABORTED).
  absl::Duration lock_wait_limit = absl::Minutes(10);
};

class Migrator {
 public:
  // Connects. UNAVAILABLE or PERMISSION_DENIED (from the connection) when the
  // database cannot be used.
  static absl::StatusOr<std::unique_ptr<Migrator>> Create(
      MigratorOptions options);
  virtual ~Migrator() = default;

  // Every known migration and every recorded one, by version.
  virtual absl::StatusOr<std::vector<MigrationState>> Status() = 0;

  // Applies pending migrations in order up to and including `to` (default:
  // all). Returns the ones applied (empty when the schema was current).
  // INVALID_ARGUMENT for a `to` that names no migration.
  virtual absl::StatusOr<std::vector<MigrationState>> Up(
      std::optional<int> to = std::nullopt) = 0;

  // Reverts applied migrations newer than `to`, newest first. Default: only
  // the newest one; `to` = 0 reverts all. Returns the ones reverted.
  // FAILED_PRECONDITION while a migration is partly applied.
  virtual absl::StatusOr<std::vector<MigrationState>> Down(
      std::optional<int> to = std::nullopt) = 0;
};

}  // namespace metrics::migrations

#endif  // METRICS_MIGRATIONS_MIGRATOR_H_
