#include "migrations/migrator.h"

#include <pqxx/connection>
#include <pqxx/nontransaction>
#include <pqxx/result>
#include <pqxx/transaction>

#include <algorithm>
#include <map>
#include <regex>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "common/status_macros.h"
#include "storage/pg/connection.h"
#include "storage/pg/pg_errors.h"

namespace metrics::migrations {

namespace {

using storage::pg::GuardPg;

// The bookkeeping tables; created under the advisory lock by the first run.
// A migration's step rows go when its schema_migrations row comes.
constexpr char kCreateBookkeeping[] = R"sql(
CREATE TABLE IF NOT EXISTS schema_migrations (
  version integer PRIMARY KEY,
  name text NOT NULL,
  checksum text NOT NULL,
  applied_at timestamptz NOT NULL DEFAULT now(),
  execution_ms bigint NOT NULL
);
CREATE TABLE IF NOT EXISTS schema_migration_steps (
  version integer NOT NULL,
  step integer NOT NULL,
  checksum text NOT NULL,
  done_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (version, step)
))sql";

constexpr char kSelectRecorded[] = R"sql(
SELECT version, name, checksum,
       (extract(epoch FROM applied_at) * 1000000)::bigint AS applied_us
  FROM schema_migrations ORDER BY version)sql";

constexpr char kSelectSteps[] = R"sql(
SELECT version, count(*)::integer, min(checksum), max(checksum)
  FROM schema_migration_steps GROUP BY version)sql";

struct Recorded {
  std::string name;
  std::string checksum;
  absl::Time applied_at;
};

// The steps done of a migration not yet applied.
struct Partial {
  int steps_done = 0;
  std::string checksum;  // of the text they were done from; "" if several
};

struct History {
  std::map<int, Recorded> applied;
  std::map<int, Partial> partial;
};

// Reads the bookkeeping tables; nothing recorded where they do not exist yet
// (schema_migration_steps came after schema_migrations).
absl::StatusOr<History> ReadHistory(pqxx::connection& conn) {
  return GuardPg("reading schema_migrations", [&]() -> absl::StatusOr<History> {
    pqxx::nontransaction tx(conn);
    History history;
    const pqxx::row exists = tx.exec1(
        "SELECT to_regclass('schema_migrations') IS NOT NULL, "
        "to_regclass('schema_migration_steps') IS NOT NULL");
    if (exists[0].as<bool>()) {
      for (const auto& row : tx.exec(kSelectRecorded)) {
        history.applied[row[0].as<int>()] = {
            row[1].as<std::string>(), row[2].as<std::string>(),
            absl::FromUnixMicros(row[3].as<int64_t>())};
      }
    }
    if (exists[1].as<bool>()) {
      for (const auto& row : tx.exec(kSelectSteps)) {
        Partial& p = history.partial[row[0].as<int>()];
        p.steps_done = row[1].as<int>();
        if (row[2].as<std::string>() == row[3].as<std::string>()) {
          p.checksum = row[2].as<std::string>();
        }
      }
    }
    return history;
  });
}

bool Accepts(const Migration& m, absl::string_view checksum) {
  return checksum == m.checksum ||
         std::find(m.accepted_checksums.begin(), m.accepted_checksums.end(),
                   checksum) != m.accepted_checksums.end();
}

std::vector<MigrationState> Compare(const std::vector<Migration>& migrations,
                                    const History& history) {
  const std::map<int, Recorded>& recorded = history.applied;
  std::map<int, MigrationState> states;
  for (const Migration& m : migrations) {
    MigrationState& s = states[m.version];
    s.version = m.version;
    s.name = m.name;
    s.steps = static_cast<int>(m.up_steps.size());
    auto it = recorded.find(m.version);
    if (it == recorded.end()) {
      s.state = MigrationState::State::kPending;
      auto partial = history.partial.find(m.version);
      if (partial != history.partial.end()) {
        s.steps_done = partial->second.steps_done;
        // Steps of another text may not be the first steps of this one.
        if (partial->second.checksum != m.checksum) {
          s.state = MigrationState::State::kChanged;
        }
      }
      continue;
    }
    s.applied_at = it->second.applied_at;
    s.state = Accepts(m, it->second.checksum)
                  ? MigrationState::State::kApplied
                  : MigrationState::State::kChanged;
  }
  for (const auto& [version, rec] : recorded) {
    if (states.count(version) != 0) continue;
    MigrationState& s = states[version];
    s.version = version;
    s.name = rec.name;
    s.state = MigrationState::State::kUnknown;
    s.applied_at = rec.applied_at;
  }
  std::vector<MigrationState> out;
  for (auto& [version, state] : states) out.push_back(std::move(state));
  return out;
}

// Refuses to touch a database whose history disagrees with the files.
absl::Status CheckConsistent(const std::vector<MigrationState>& states) {
  for (const MigrationState& s : states) {
    if (s.state == MigrationState::State::kChanged && s.steps_done > 0) {
      return absl::FailedPreconditionError(absl::StrCat(
          "migration ", MigrationLabel(s.version, s.name), " is partly applied (",
          s.steps_done, " step(s) done) from another text of its file; finish "
          "it with the metricsctl of the release that began it"));
    }
    if (s.state == MigrationState::State::kChanged) {
      return absl::FailedPreconditionError(absl::StrCat(
          "migration ", MigrationLabel(s.version, s.name),
          " was changed after it was applied: its file's checksum differs "
          "from the one the database recorded; restore the original file and "
          "put the change in a new migration"));
    }
    if (s.state == MigrationState::State::kUnknown) {
      return absl::FailedPreconditionError(absl::StrCat(
          "the database has migration ", MigrationLabel(s.version, s.name),
          " applied, which these migrations do not include; use the "
          "metricsctl of the release that applied it"));
    }
  }
  return absl::OkStatus();
}

// Holds the migration advisory lock on `conn` for its lifetime.
class MigrationLock {
 public:
  // Polls rather than waits in pg_advisory_lock: a session waiting there
  // holds a transaction open, and CREATE INDEX CONCURRENTLY in the runner
  // holding the lock waits for every open transaction to end: a deadlock.
  static absl::StatusOr<std::unique_ptr<MigrationLock>> Acquire(
      pqxx::connection& conn,
      const std::function<void(absl::string_view)>& on_wait) {
    const std::string try_lock =
        absl::StrCat("SELECT pg_try_advisory_lock(", kMigrationLockKey, ")");
    for (bool first = true;; first = false) {
      ASSIGN_OR_RETURN(const bool taken,
                       GuardPg("taking the migration lock",
                               [&]() -> absl::StatusOr<bool> {
                                 pqxx::nontransaction tx(conn);
                                 return tx.exec1(try_lock)[0].as<bool>();
                               }));
      if (taken) break;
      if (first) on_wait("waiting for another migration run to finish");
      absl::SleepFor(absl::Milliseconds(200));
    }
    return std::unique_ptr<MigrationLock>(new MigrationLock(conn));
  }

  ~MigrationLock() {
    // If the connection broke, the server already released the lock with it.
    absl::Status ignored = GuardPg("releasing the migration lock", [&] {
      pqxx::nontransaction tx(conn_);
      tx.exec("SELECT pg_advisory_unlock(" +
              std::to_string(kMigrationLockKey) + ")");
      return absl::OkStatus();
    });
    ignored.IgnoreError();
  }

 private:
  explicit MigrationLock(pqxx::connection& conn) : conn_(conn) {}
  pqxx::connection& conn_;
};

}  // namespace

absl::string_view StateName(MigrationState::State state) {
  switch (state) {
    case MigrationState::State::kApplied:
      return "applied";
    case MigrationState::State::kPending:
      return "pending";
    case MigrationState::State::kChanged:
      return "CHANGED";
    case MigrationState::State::kUnknown:
      return "UNKNOWN";
  }
  return "?";
}

namespace {

// The index a step builds: its name as written, if the step is a
// CREATE [UNIQUE] INDEX CONCURRENTLY.
std::optional<std::string> IndexBuiltBy(const std::string& sql) {
  static const std::regex* const kBuild = new std::regex(
      R"re(CREATE\s+(UNIQUE\s+)?INDEX\s+CONCURRENTLY\s+(IF\s+NOT\s+EXISTS\s+)?("[^"]+"|[\w.]+)\s+ON\b)re",
      std::regex::icase);
  std::smatch match;
  if (!std::regex_search(sql, match, *kBuild)) return std::nullopt;
  return match[3].str();
}

class PgMigrator : public Migrator {
 public:
  PgMigrator(MigratorOptions options, std::unique_ptr<pqxx::connection> conn)
      : options_(std::move(options)), conn_(std::move(conn)) {}

  absl::StatusOr<std::vector<MigrationState>> Status() override;
  absl::StatusOr<std::vector<MigrationState>> Up(
      std::optional<int> to) override;
  absl::StatusOr<std::vector<MigrationState>> Down(
      std::optional<int> to) override;

 private:
  void Progress(absl::string_view event) {
    if (options_.on_progress) options_.on_progress(event);
  }

  // Runs the steps of `m` from `first` on; the last one's transaction (or one
  // after it) records the migration as applied.
  absl::Status Apply(const Migration& m, int first);
  // One step in its own transaction (again and again for a repeated one),
  // retried while it cannot take its locks within lock_timeout.
  absl::Status RunInTransaction(const Migration& m, int step, bool last,
                                absl::Time start);
  absl::Status RunOutsideTransaction(const Migration& m, int step);
  // In `tx`: the step is done, or for the last one, the migration.
  void Record(pqxx::work& tx, const Migration& m, int step, bool last,
              absl::Time start);

  MigratorOptions options_;
  std::unique_ptr<pqxx::connection> conn_;
};

absl::StatusOr<std::vector<MigrationState>> PgMigrator::Status() {
  ASSIGN_OR_RETURN(History history, ReadHistory(*conn_));
  return Compare(options_.migrations, history);
}

void PgMigrator::Record(pqxx::work& tx, const Migration& m, int step,
                        bool last, absl::Time start) {
  if (!last) {
    tx.exec_params(
        "INSERT INTO schema_migration_steps (version, step, checksum) "
        "VALUES ($1, $2, $3)",
        m.version, step, m.checksum);
    return;
  }
  tx.exec_params("DELETE FROM schema_migration_steps WHERE version = $1",
                 m.version);
  tx.exec_params(
      "INSERT INTO schema_migrations (version, name, checksum, "
      "execution_ms) VALUES ($1, $2, $3, $4)",
      m.version, m.name, m.checksum,
      absl::ToInt64Milliseconds(absl::Now() - start));
}

absl::Status PgMigrator::RunInTransaction(const Migration& m, int step,
                                          bool last, absl::Time start) {
  const MigrationStep& s = m.up_steps[step];
  const std::string label = MigrationLabel(m.version, m.name);
  const std::string operation =
      s.description.empty()
          ? absl::StrCat("applying migration ", label)
          : absl::StrCat("applying migration ", label, " step ", step + 1,
                         " (", s.description, ")");
  const std::string who =
      s.description.empty() ? label : absl::StrCat("step ", step + 1);
  const std::string set_lock_timeout = absl::StrCat(
      "SET LOCAL lock_timeout = ",
      std::max<int64_t>(1, absl::ToInt64Milliseconds(options_.lock_timeout)));
  // Since when the step has found its locks taken; a repeated step's rounds
  // that go through end the wait.
  std::optional<absl::Time> waiting_since;
  absl::Duration backoff = absl::Milliseconds(100);
  int64_t rows_so_far = 0;
  absl::Time last_report = absl::Now();
  while (true) {
    bool done = false;
    const absl::Status status = GuardPg(operation, [&] {
      pqxx::work tx(*conn_);
      tx.exec(set_lock_timeout);
      const pqxx::result result = tx.exec(s.sql);
      const int64_t rows = result.affected_rows();
      done = s.kind != MigrationStep::Kind::kRepeated || rows == 0;
      if (done) Record(tx, m, step, last, start);
      tx.commit();
      rows_so_far += rows;
      return absl::OkStatus();
    });
    if (status.ok()) {
      if (done) return absl::OkStatus();
      waiting_since.reset();
      backoff = absl::Milliseconds(100);
      if (absl::Now() - last_report >= absl::Seconds(1)) {
        Progress(absl::StrCat(who, ": ", rows_so_far, " rows so far"));
        last_report = absl::Now();
      }
      continue;
    }
    // ABORTED: a lock not taken within lock_timeout, or a deadlock.
    if (status.code() != absl::StatusCode::kAborted) return status;
    if (!waiting_since.has_value()) waiting_since = absl::Now();
    if (absl::Now() - *waiting_since + backoff > options_.lock_wait_limit) {
      return absl::AbortedError(absl::StrCat(
          operation, ": other sessions kept conflicting locks for ",
          absl::FormatDuration(options_.lock_wait_limit),
          "; see pg_locks and pg_stat_activity, then run it again (",
          status.message(), ")"));
    }
    Progress(absl::StrCat(
        who, ": its locks were not free within ",
        absl::FormatDuration(options_.lock_timeout), "; retrying in ",
        absl::FormatDuration(backoff)));
    absl::SleepFor(backoff);
    backoff = std::min(backoff * 2, absl::Seconds(5));
  }
}

absl::Status PgMigrator::RunOutsideTransaction(const Migration& m, int step) {
  const MigrationStep& s = m.up_steps[step];
  const std::string operation =
      absl::StrCat("applying migration ", MigrationLabel(m.version, m.name),
                   " step ", step + 1, " (", s.description, ")");
  return GuardPg(operation, [&] {
    pqxx::nontransaction tx(*conn_);
    if (std::optional<std::string> index = IndexBuiltBy(s.sql)) {
      // A build that was interrupted (a lost connection, a kill) leaves the
      // index invalid, and one that finished after its runner died leaves it
      // valid but the step not recorded.
      const pqxx::result found = tx.exec_params(
          "SELECT indisvalid FROM pg_index WHERE indexrelid = to_regclass($1)",
          *index);
      if (!found.empty() && found[0][0].as<bool>()) {
        Progress(absl::StrCat("step ", step + 1, ": index ", *index,
                              " is built already"));
        return absl::OkStatus();
      }
      if (!found.empty()) {
        Progress(absl::StrCat("step ", step + 1, ": dropping the invalid index ",
                              *index, " an interrupted build left"));
        tx.exec("DROP INDEX CONCURRENTLY " + *index);
      }
    }
    tx.exec(s.sql);
    return absl::OkStatus();
  });
}

absl::Status PgMigrator::Apply(const Migration& m, int first) {
  const absl::Time start = absl::Now();
  const int steps = static_cast<int>(m.up_steps.size());
  for (int i = first; i < steps; ++i) {
    const MigrationStep& s = m.up_steps[i];
    const bool last = i + 1 == steps;
    if (steps > 1) {
      Progress(absl::StrCat("step ", i + 1, " of ", steps, ": ", s.description));
    }
    if (s.kind != MigrationStep::Kind::kOutsideTransaction) {
      RETURN_IF_ERROR(RunInTransaction(m, i, last, start));
      continue;
    }
    RETURN_IF_ERROR(RunOutsideTransaction(m, i));
    RETURN_IF_ERROR(GuardPg(
        absl::StrCat("recording migration ", MigrationLabel(m.version, m.name),
                     " step ", i + 1),
        [&] {
          pqxx::work tx(*conn_);
          Record(tx, m, i, last, start);
          tx.commit();
          return absl::OkStatus();
        }));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<MigrationState>> PgMigrator::Up(
    std::optional<int> to) {
  if (to.has_value()) {
    bool known = false;
    for (const Migration& m : options_.migrations) known |= m.version == *to;
    if (!known) {
      return absl::InvalidArgumentError(
          absl::StrCat("--to ", *to, ": no migration has that version"));
    }
  }
  ASSIGN_OR_RETURN(auto lock, MigrationLock::Acquire(
                                  *conn_, [this](absl::string_view e) {
                                    Progress(e);
                                  }));
  RETURN_IF_ERROR(GuardPg("creating schema_migrations", [&] {
    pqxx::nontransaction tx(*conn_);
    tx.exec(kCreateBookkeeping);
    return absl::OkStatus();
  }));
  // Read only after taking the lock: a runner that waited sees the work of
  // the one it waited for.
  ASSIGN_OR_RETURN(History history, ReadHistory(*conn_));
  std::vector<MigrationState> states = Compare(options_.migrations, history);
  RETURN_IF_ERROR(CheckConsistent(states));

  std::vector<MigrationState> applied;
  for (const Migration& m : options_.migrations) {
    if (to.has_value() && m.version > *to) break;
    if (history.applied.count(m.version) != 0) continue;
    const std::string label = MigrationLabel(m.version, m.name);
    auto partial = history.partial.find(m.version);
    const int first =
        partial == history.partial.end() ? 0 : partial->second.steps_done;
    Progress(first == 0 ? absl::StrCat("applying ", label)
                        : absl::StrCat("resuming ", label, " at step ",
                                       first + 1, " of ", m.up_steps.size()));
    const absl::Time start = absl::Now();
    RETURN_IF_ERROR(Apply(m, first));
    MigrationState done;
    done.version = m.version;
    done.name = m.name;
    done.state = MigrationState::State::kApplied;
    done.applied_at = absl::Now();
    done.took = absl::Now() - start;
    done.steps = static_cast<int>(m.up_steps.size());
    done.steps_done = done.steps;
    applied.push_back(std::move(done));
  }
  return applied;
}

absl::StatusOr<std::vector<MigrationState>> PgMigrator::Down(
    std::optional<int> to) {
  if (to.has_value() && *to < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--to ", *to, ": must be 0 or a migration's version"));
  }
  ASSIGN_OR_RETURN(auto lock, MigrationLock::Acquire(
                                  *conn_, [this](absl::string_view e) {
                                    Progress(e);
                                  }));
  ASSIGN_OR_RETURN(History history, ReadHistory(*conn_));
  const std::vector<MigrationState> states =
      Compare(options_.migrations, history);
  RETURN_IF_ERROR(CheckConsistent(states));
  for (const MigrationState& s : states) {
    if (s.steps_done > 0) {
      return absl::FailedPreconditionError(absl::StrCat(
          "migration ", MigrationLabel(s.version, s.name), " is partly applied (",
          s.steps_done, " of ", s.steps,
          " steps done); run \"metricsctl migrate up\" to finish it before "
          "reverting"));
    }
  }
  const std::map<int, Recorded>& recorded = history.applied;
  if (recorded.empty()) return std::vector<MigrationState>{};

  // Without --to, revert only the newest applied migration.
  const int target = to.has_value() ? *to
                     : recorded.size() > 1
                         ? std::prev(recorded.end(), 2)->first
                         : 0;
  std::vector<MigrationState> reverted;
  for (auto it = options_.migrations.rbegin();
       it != options_.migrations.rend(); ++it) {
    const Migration& m = *it;
    if (m.version <= target) break;
    if (recorded.count(m.version) == 0) continue;
    const std::string label = MigrationLabel(m.version, m.name);
    Progress(absl::StrCat("reverting ", label));
    const absl::Time start = absl::Now();
    RETURN_IF_ERROR(GuardPg(absl::StrCat("reverting migration ", label), [&] {
      pqxx::work tx(*conn_);
      tx.exec(m.down_sql);
      tx.exec_params("DELETE FROM schema_migrations WHERE version = $1",
                     m.version);
      tx.commit();
      return absl::OkStatus();
    }));
    MigrationState done;
    done.version = m.version;
    done.name = m.name;
    done.state = MigrationState::State::kPending;
    done.took = absl::Now() - start;
    reverted.push_back(std::move(done));
  }
  return reverted;
}

}  // namespace

absl::StatusOr<std::unique_ptr<Migrator>> Migrator::Create(
    MigratorOptions options) {
  // A Migration built by hand rather than by BuildMigrations: its whole text
  // is its one step.
  for (Migration& m : options.migrations) {
    if (m.up_steps.empty()) {
      MigrationStep whole;
      whole.sql = m.up_sql;
      m.up_steps.push_back(std::move(whole));
    }
  }
  ASSIGN_OR_RETURN(std::unique_ptr<pqxx::connection> conn,
                   storage::pg::Connect(options.database_url,
                                        options.application_name));
  return std::make_unique<PgMigrator>(std::move(options), std::move(conn));
}

}  // namespace metrics::migrations
