#include "storage/pg/pg_metric_store.h"

#include <pqxx/nontransaction>
#include <pqxx/result>
#include <pqxx/transaction>

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "storage/pg/connection.h"
#include "storage/pg/generic_reports.h"
#include "storage/pg/pg_errors.h"
#include "storage/pg/pooled_transaction.h"
#include "storage/pg/trial_rows.h"

namespace metrics::storage::pg {

std::unique_ptr<PgMetricStore> PgMetricStore::Create(
    PgMetricStoreOptions options) {
  return std::unique_ptr<PgMetricStore>(new PgMetricStore(std::move(options)));
}

PgMetricStore::PgMetricStore(PgMetricStoreOptions options)
    : options_(std::move(options)),
      pool_(ConnectionPoolOptions{options_.database_url, "metricsd",
                                  options_.pool_size, PgReads::Statements(),
                                  KeyedAccessSettings()}),
      reads_(pool_, ""),
      notifier_(options_.database_url) {
  IngestWriterOptions writer = options_.writer;
  writer.database_url = options_.database_url;
  writer.max_series_per_trial = options_.limits.max_series_per_trial;
  writer_ = std::make_unique<IngestWriter>(std::move(writer));
  if (!options_.read.database_url.empty()) {
    ReadReplicaOptions read;
    read.primary_url = options_.database_url;
    read.standby_url = options_.read.database_url;
    read.pool_size = options_.pool_size;
    read.statements = PgReads::Statements();
    read.max_lag = options_.read.max_lag;
    read.check_every = options_.read.check_every;
    read.on_change = options_.read.on_change;
    replica_ = std::make_unique<ReadReplica>(std::move(read));
    standby_reads_ =
        std::make_unique<PgReads>(replica_->pool(), " on the standby");
    routed_reads_ = std::make_unique<RoutedReads>(&reads_, standby_reads_.get(),
                                                  replica_.get());
  }
}

ChartReads& PgMetricStore::Reads() {
  if (routed_reads_ != nullptr) return *routed_reads_;
  return reads_;
}

ReadRoutingStatistics PgMetricStore::GetReadRoutingStatistics() const {
  return replica_ != nullptr ? replica_->Statistics() : ReadRoutingStatistics();
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
  return Write<Trial>(
      pool_, operation, deadline,
      [&](pqxx::transaction_base& tx) -> absl::StatusOr<Trial> {
        if (id.has_value()) {
          pqxx::result r = tx.exec_params(
              absl::StrCat("INSERT INTO trials (id) VALUES ($1) "
                           "ON CONFLICT (id) DO NOTHING RETURNING ",
                           TrialColumnsSql()),
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
              TrialColumnsSql()));
          if (!r.empty()) return TrialFromRow(r[0]);
        }
        return absl::InternalError("no free trial id after 1000 attempts");
      });
}


absl::StatusOr<Trial> PgMetricStore::GetTrial(int32_t id, absl::Time deadline) {
  return reads_.GetTrial(id, deadline);
}

absl::StatusOr<Trial> PgMetricStore::SetTrialState(int32_t id, TrialState state,
                                                   absl::Time deadline) {
  return Write<Trial>(
      pool_, absl::StrCat("setting the state of trial ", id), deadline,
      [&](pqxx::transaction_base& tx) -> absl::StatusOr<Trial> {
        pqxx::result r = tx.exec_params(
            absl::StrCat("SELECT ", TrialColumnsSql(),
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
                         TrialColumnsSql()),
            id, std::string(TrialStateName(state)));
        // Ends the trial's follow streams, on every metricsd.
        tx.exec_params("SELECT pg_notify($2, $1::text)", id,
                       std::string(kTrialsChannel));
        return TrialFromRow(r[0]);
      });
}


absl::StatusOr<Trial> PgMetricStore::BeginTrialRun(int32_t trial_id,
                                                   int32_t run_id,
                                                   absl::Time deadline) {
  return pg::BeginTrialRun(pool_, trial_id, run_id, deadline);
}

absl::StatusOr<GenericWrite> PgMetricStore::WriteGenericReport(
    const GenericReport& report, absl::Time deadline) {
  return pg::WriteGenericReport(pool_, report, deadline);
}

absl::StatusOr<std::vector<GenericRow>> PgMetricStore::ReadGenericReports(
    int32_t trial_id, absl::string_view group, int32_t after_batches,
    size_t limit, absl::Time deadline) {
  return pg::ReadGenericReports(pool_, trial_id, group, after_batches, limit,
                                deadline);
}

absl::StatusOr<StreamStart> PgMetricStore::GetStreamStart(
    int32_t trial_id, absl::string_view stream_id, absl::Time deadline) {
  return reads_.GetStreamStart(trial_id, stream_id, deadline);
}

absl::StatusOr<LatestValues> PgMetricStore::LatestValuesOfActiveTrials(
    size_t limit, int64_t live_since_us, absl::Time deadline) {
  return reads_.LatestValuesOfActiveTrials(limit, live_since_us, deadline);
}

absl::StatusOr<std::vector<AgentActivity>> PgMetricStore::AgentActivityOfTrials(
    const std::vector<int32_t>& trial_ids, absl::Time deadline) {
  return reads_.AgentActivityOfTrials(trial_ids, deadline);
}

absl::StatusOr<std::vector<StoredInventory>> PgMetricStore::InventoriesOfTrial(
    int32_t trial_id, absl::Time deadline) {
  return reads_.InventoriesOfTrial(trial_id, deadline);
}

absl::StatusOr<std::vector<SeriesInfo>> PgMetricStore::ListSeriesOfEveryGroup(
    int32_t trial_id, absl::Time deadline) {
  return reads_.ListSeriesOfEveryGroup(trial_id, deadline);
}

absl::StatusOr<std::vector<Reading>> PgMetricStore::ReadReadings(
    int32_t trial_id, const SeriesInfo& series, ReadingCursor after,
    size_t limit, absl::Time deadline) {
  return reads_.ReadReadings(trial_id, series, after, limit, deadline);
}

std::unique_ptr<ChangeSubscription> PgMetricStore::SubscribeToChanges(
    int32_t trial_id, std::vector<std::string> agent_ids,
    std::function<void()> on_change) {
  return notifier_.Subscribe(trial_id, std::move(agent_ids),
                             std::move(on_change));
}

absl::Status PgMetricStore::SubmitBatch(
    MetricBatch batch, absl::AnyInvocable<void(BatchOutcome) &&> done) {
  auto pending = std::make_unique<PendingBatch>();
  pending->rejection = ValidateBatch(batch, options_.limits, options_.clock());
  pending->rollup_buckets = FinestRollupBuckets(batch);
  pending->batch = std::move(batch);
  pending->done = std::move(done);
  return writer_->Submit(std::move(pending));
}

absl::Status PgMetricStore::CheckDatabase() {
  absl::MutexLock lock(&check_mu_);
  absl::Status status = GuardPg("checking the database", [&]() -> absl::Status {
    check_mu_.AssertHeld();  // tells the lock analysis: this runs here
    if (check_connection_ == nullptr) {
      // Bounded waits: a check must fail, not hang, when the network does.
      ASSIGN_OR_RETURN(std::string url,
                       WithConnectionOptions(options_.database_url,
                                             {{"connect_timeout", "3"},
                                              {"tcp_user_timeout", "3000"}}));
      ASSIGN_OR_RETURN(check_connection_, Connect(url, "metricsd-readiness"));
    }
    pqxx::nontransaction tx(*check_connection_);
    tx.exec("SELECT 1");
    return absl::OkStatus();
  });
  if (!status.ok()) check_connection_.reset();  // a new one next time
  return status;
}

void PgMetricStore::Shutdown(absl::Time deadline) {
  writer_->Shutdown(deadline);
  notifier_.Shutdown();
  if (replica_ != nullptr) replica_->Shutdown();
  pool_.Shutdown();
}

}  // namespace metrics::storage::pg
