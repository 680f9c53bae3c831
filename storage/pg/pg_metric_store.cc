#include "storage/pg/pg_metric_store.h"

#include <pqxx/result>
#include <pqxx/transaction>

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "storage/pg/pg_errors.h"

namespace metrics::storage::pg {

namespace {

constexpr char kTrialColumns[] =
    "id, state, (extract(epoch FROM created_at) * 1000000)::bigint, "
    "(extract(epoch FROM updated_at) * 1000000)::bigint, "
    "(extract(epoch FROM ended_at) * 1000000)::bigint";

Trial TrialFromRow(const pqxx::row& row) {
  Trial trial;
  trial.id = row[0].as<int32_t>();
  const std::string state = row[1].as<std::string>();
  for (TrialState s : {TrialState::kActive, TrialState::kCompleted,
                       TrialState::kCanceled, TrialState::kError}) {
    if (TrialStateName(s) == state) trial.state = s;
  }
  trial.created_at = absl::FromUnixMicros(row[2].as<int64_t>());
  trial.updated_at = absl::FromUnixMicros(row[3].as<int64_t>());
  if (!row[4].is_null()) {
    trial.ended_at = absl::FromUnixMicros(row[4].as<int64_t>());
  }
  return trial;
}

// Runs `body(tx)` in a transaction on a pooled connection, with the
// statement timeout set from `deadline`; commits if it returns OK.
template <typename T, typename Body>
absl::StatusOr<T> InTransaction(ConnectionPool& pool,
                                absl::string_view operation,
                                absl::Time deadline, Body body) {
  const absl::Duration left = deadline - absl::Now();
  if (left <= absl::ZeroDuration()) {
    return absl::DeadlineExceededError(
        absl::StrCat(operation, ": deadline passed before it started"));
  }
  ASSIGN_OR_RETURN(ConnectionPool::Lease lease, pool.Acquire(deadline));
  return GuardPg(operation, [&]() -> absl::StatusOr<T> {
    pqxx::work tx(lease.connection());
    tx.exec(absl::StrCat(
        "SET LOCAL statement_timeout = ",
        std::max<int64_t>(1, absl::ToInt64Milliseconds(deadline - absl::Now()))));
    absl::StatusOr<T> result = body(tx);
    if (result.ok()) tx.commit();
    return result;
  });
}

}  // namespace

std::unique_ptr<PgMetricStore> PgMetricStore::Create(
    PgMetricStoreOptions options) {
  return std::unique_ptr<PgMetricStore>(new PgMetricStore(std::move(options)));
}

PgMetricStore::PgMetricStore(PgMetricStoreOptions options)
    : options_(std::move(options)),
      pool_(ConnectionPoolOptions{options_.database_url, "metricsd",
                                  options_.pool_size}) {
  IngestWriterOptions writer = options_.writer;
  writer.database_url = options_.database_url;
  writer.max_series_per_trial = options_.limits.max_series_per_trial;
  writer_ = std::make_unique<IngestWriter>(std::move(writer));
}

PgMetricStore::~PgMetricStore() { Shutdown(absl::Now()); }

absl::StatusOr<Trial> PgMetricStore::CreateTrial(std::optional<int32_t> id,
                                                 absl::Time deadline) {
  if (id.has_value() && *id <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("id: ", *id, " is not a valid trial id (must be > 0)"));
  }
  const std::string operation =
      id.has_value() ? absl::StrCat("creating trial ", *id) : "creating a trial";
  return InTransaction<Trial>(
      pool_, operation, deadline, [&](pqxx::work& tx) -> absl::StatusOr<Trial> {
        if (id.has_value()) {
          pqxx::result r = tx.exec_params(
              absl::StrCat("INSERT INTO trials (id) VALUES ($1) "
                           "ON CONFLICT (id) DO NOTHING RETURNING ",
                           kTrialColumns),
              *id);
          if (r.empty()) {
            return absl::AlreadyExistsError(
                absl::StrCat("trial ", *id, " already exists"));
          }
          return TrialFromRow(r[0]);
        }
        // The identity sequence may hand out an id the platform already
        // registered explicitly; skip those.
        for (int attempt = 0; attempt < 1000; ++attempt) {
          pqxx::result r = tx.exec(absl::StrCat(
              "INSERT INTO trials DEFAULT VALUES ON CONFLICT (id) DO NOTHING "
              "RETURNING ",
              kTrialColumns));
          if (!r.empty()) return TrialFromRow(r[0]);
        }
        return absl::InternalError("no free trial id after 1000 attempts");
      });
}

absl::StatusOr<Trial> PgMetricStore::GetTrial(int32_t id, absl::Time deadline) {
  return InTransaction<Trial>(
      pool_, absl::StrCat("reading trial ", id), deadline,
      [&](pqxx::work& tx) -> absl::StatusOr<Trial> {
        pqxx::result r = tx.exec_params(
            absl::StrCat("SELECT ", kTrialColumns, " FROM trials WHERE id = $1"),
            id);
        if (r.empty()) {
          return absl::NotFoundError(absl::StrCat("trial ", id, " does not exist"));
        }
        return TrialFromRow(r[0]);
      });
}

absl::StatusOr<Trial> PgMetricStore::SetTrialState(int32_t id, TrialState state,
                                                   absl::Time deadline) {
  return InTransaction<Trial>(
      pool_, absl::StrCat("setting the state of trial ", id), deadline,
      [&](pqxx::work& tx) -> absl::StatusOr<Trial> {
        pqxx::result r = tx.exec_params(
            absl::StrCat("SELECT ", kTrialColumns,
                         " FROM trials WHERE id = $1 FOR UPDATE"),
            id);
        if (r.empty()) {
          return absl::NotFoundError(absl::StrCat("trial ", id, " does not exist"));
        }
        const Trial current = TrialFromRow(r[0]);
        if (current.state == state) return current;
        if (IsTerminal(current.state)) {
          return absl::FailedPreconditionError(absl::StrCat(
              "trial ", id, " is already ", TrialStateName(current.state),
              "; it cannot become ", TrialStateName(state)));
        }
        r = tx.exec_params(
            absl::StrCat("UPDATE trials SET state = $2, updated_at = now(), "
                         "ended_at = now() WHERE id = $1 RETURNING ",
                         kTrialColumns),
            id, std::string(TrialStateName(state)));
        return TrialFromRow(r[0]);
      });
}

absl::StatusOr<int64_t> PgMetricStore::GetStreamPosition(
    int32_t trial_id, absl::string_view stream_id, absl::Time deadline) {
  return InTransaction<int64_t>(
      pool_, absl::StrCat("reading the position of stream ", stream_id),
      deadline, [&](pqxx::work& tx) -> absl::StatusOr<int64_t> {
        pqxx::result r = tx.exec_params(
            "SELECT last_sequence FROM ingest_positions "
            "WHERE trial_id = $1 AND stream_id = $2",
            trial_id, std::string(stream_id));
        return r.empty() ? 0 : r[0][0].as<int64_t>();
      });
}

absl::Status PgMetricStore::SubmitBatch(
    SystemBatch batch, absl::AnyInvocable<void(BatchOutcome) &&> done) {
  auto pending = std::make_unique<PendingBatch>();
  pending->rejection = ValidateBatch(batch, options_.limits, options_.clock());
  pending->batch = std::move(batch);
  pending->done = std::move(done);
  return writer_->Submit(std::move(pending));
}

void PgMetricStore::Shutdown(absl::Time deadline) {
  writer_->Shutdown(deadline);
  pool_.Shutdown();
}

}  // namespace metrics::storage::pg
