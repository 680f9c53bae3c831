#include "migrations/migrator.h"

#include <pqxx/connection>
#include <pqxx/nontransaction>
#include <pqxx/result>
#include <pqxx/transaction>

#include <map>
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

// The bookkeeping table; created under the advisory lock by the first run.
constexpr char kCreateBookkeeping[] = R"sql(
CREATE TABLE IF NOT EXISTS schema_migrations (
  version integer PRIMARY KEY,
  name text NOT NULL,
  checksum text NOT NULL,
  applied_at timestamptz NOT NULL DEFAULT now(),
  execution_ms bigint NOT NULL
))sql";

constexpr char kSelectRecorded[] = R"sql(
SELECT version, name, checksum,
       (extract(epoch FROM applied_at) * 1000000)::bigint AS applied_us
  FROM schema_migrations ORDER BY version)sql";

struct Recorded {
  std::string name;
  std::string checksum;
  absl::Time applied_at;
};

// Reads schema_migrations; none recorded if the table does not exist yet.
absl::StatusOr<std::map<int, Recorded>> ReadRecorded(pqxx::connection& conn) {
  return GuardPg(
      "reading schema_migrations",
      [&]() -> absl::StatusOr<std::map<int, Recorded>> {
        pqxx::nontransaction tx(conn);
        std::map<int, Recorded> recorded;
        if (tx.exec("SELECT to_regclass('schema_migrations') IS NOT NULL")[0][0]
                .as<bool>()) {
          for (const auto& row : tx.exec(kSelectRecorded)) {
            recorded[row[0].as<int>()] = {
                row[1].as<std::string>(), row[2].as<std::string>(),
                absl::FromUnixMicros(row[3].as<int64_t>())};
          }
        }
        return recorded;
      });
}

std::vector<MigrationState> Compare(const std::vector<Migration>& migrations,
                                    const std::map<int, Recorded>& recorded) {
  std::map<int, MigrationState> states;
  for (const Migration& m : migrations) {
    MigrationState& s = states[m.version];
    s.version = m.version;
    s.name = m.name;
    auto it = recorded.find(m.version);
    if (it == recorded.end()) {
      s.state = MigrationState::State::kPending;
      continue;
    }
    s.applied_at = it->second.applied_at;
    s.state = it->second.checksum == m.checksum
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
  static absl::StatusOr<std::unique_ptr<MigrationLock>> Acquire(
      pqxx::connection& conn,
      const std::function<void(absl::string_view)>& on_wait) {
    RETURN_IF_ERROR(GuardPg("taking the migration lock", [&]() -> absl::Status {
      pqxx::nontransaction tx(conn);
      const std::string key = std::to_string(kMigrationLockKey);
      if (!tx.exec("SELECT pg_try_advisory_lock(" + key + ")")[0][0]
               .as<bool>()) {
        on_wait("waiting for another migration run to finish");
        tx.exec("SELECT pg_advisory_lock(" + key + ")");
      }
      return absl::OkStatus();
    }));
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

  MigratorOptions options_;
  std::unique_ptr<pqxx::connection> conn_;
};

absl::StatusOr<std::vector<MigrationState>> PgMigrator::Status() {
  ASSIGN_OR_RETURN(auto recorded, ReadRecorded(*conn_));
  return Compare(options_.migrations, recorded);
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
  ASSIGN_OR_RETURN(auto recorded, ReadRecorded(*conn_));
  std::vector<MigrationState> states = Compare(options_.migrations, recorded);
  RETURN_IF_ERROR(CheckConsistent(states));

  std::vector<MigrationState> applied;
  for (const Migration& m : options_.migrations) {
    if (to.has_value() && m.version > *to) break;
    if (recorded.count(m.version) != 0) continue;
    const std::string label = MigrationLabel(m.version, m.name);
    Progress(absl::StrCat("applying ", label));
    const absl::Time start = absl::Now();
    RETURN_IF_ERROR(GuardPg(absl::StrCat("applying migration ", label), [&] {
      pqxx::work tx(*conn_);
      tx.exec(m.up_sql);
      tx.exec_params(
          "INSERT INTO schema_migrations (version, name, checksum, "
          "execution_ms) VALUES ($1, $2, $3, $4)",
          m.version, m.name, m.checksum,
          absl::ToInt64Milliseconds(absl::Now() - start));
      tx.commit();
      return absl::OkStatus();
    }));
    MigrationState done;
    done.version = m.version;
    done.name = m.name;
    done.state = MigrationState::State::kApplied;
    done.applied_at = absl::Now();
    done.took = absl::Now() - start;
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
  ASSIGN_OR_RETURN(auto recorded, ReadRecorded(*conn_));
  RETURN_IF_ERROR(CheckConsistent(Compare(options_.migrations, recorded)));
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
  ASSIGN_OR_RETURN(std::unique_ptr<pqxx::connection> conn,
                   storage::pg::Connect(options.database_url,
                                        options.application_name));
  return std::make_unique<PgMigrator>(std::move(options), std::move(conn));
}

}  // namespace metrics::migrations
