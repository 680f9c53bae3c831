#include "storage/pg/pg_metric_store.h"

#include <pqxx/connection>
#include <pqxx/nontransaction>
#include <pqxx/result>
#include <pqxx/transaction>

#include <initializer_list>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "common/status_macros.h"
#include "storage/pg/change_notifier.h"
#include "storage/pg/connection.h"
#include "storage/pg/connection_pool.h"
#include "storage/pg/generic_reports.h"
#include "storage/pg/ingest/ingest_writer.h"
#include "storage/pg/pg_errors.h"
#include "storage/pg/pooled_transaction.h"
#include "storage/pg/reads/chart_reads.h"
#include "storage/pg/reads/fleet_reads.h"
#include "storage/pg/reads/legacy_reads.h"
#include "storage/pg/reads/read_replica.h"
#include "storage/pg/reads/routed_reads.h"
#include "storage/pg/reads/trial_reads.h"
#include "storage/pg/trial_rows.h"

namespace metrics::storage::pg {

namespace {

// The statements of `lists`, each once (several reads share one).
std::vector<PreparedStatement> Union(std::initializer_list<std::vector<PreparedStatement>> lists) {
  std::vector<PreparedStatement> all;
  absl::flat_hash_set<std::string> names;
  for (const std::vector<PreparedStatement>& list : lists) {
    for (const PreparedStatement& statement : list) {
      if (names.insert(statement.name).second) all.push_back(statement);
    }
  }
  return all;
}

}  // namespace

struct PgMetricStore::Parts {
  explicit Parts(const PgMetricStoreOptions& options)
      : pool(ConnectionPoolOptions{
            options.database_url, "metricsd", options.pool_size,
            Union({PgChartReads::Statements(), PgTrialReads::Statements(),
                   PgLegacyReads::Statements()}),
            KeyedAccessSettings()}),
        chart(pool, ""),
        trial(pool, ""),
        fleet(pool, ""),
        legacy(pool, ""),
        notifier(options.database_url) {}

  ConnectionPool pool;
  // Over pool: the primary.
  PgChartReads chart;
  PgTrialReads trial;
  PgFleetReads fleet;
  PgLegacyReads legacy;
  ChangeNotifier notifier;
  std::unique_ptr<IngestWriter> writer;
  // Null without a standby.
  std::unique_ptr<ReadReplica> replica;
  std::unique_ptr<PgChartReads> standby_chart;  // over replica->pool()
  std::unique_ptr<RoutedReads> routed;
  absl::Mutex check_mu;
  // CheckDatabase's; null until its first call and after a failure.
  std::unique_ptr<pqxx::connection> check_connection ABSL_GUARDED_BY(check_mu);
  mutable absl::Mutex state_mu;
  DatabaseServerState state ABSL_GUARDED_BY(state_mu);
};

std::unique_ptr<PgMetricStore> PgMetricStore::Create(
    PgMetricStoreOptions options) {
  return std::unique_ptr<PgMetricStore>(new PgMetricStore(std::move(options)));
}

PgMetricStore::PgMetricStore(PgMetricStoreOptions options)
    : options_(std::move(options)), parts_(std::make_unique<Parts>(options_)) {
  IngestWriterOptions writer = options_.writer;
  writer.database_url = options_.database_url;
  writer.max_series_per_trial = options_.limits.max_series_per_trial;
  parts_->writer = std::make_unique<IngestWriter>(std::move(writer));
  if (!options_.read.database_url.empty()) {
    ReadReplicaOptions read;
    read.primary_url = options_.database_url;
    read.standby_url = options_.read.database_url;
    read.pool_size = options_.pool_size;
    // The standby serves chart reads only.
    read.statements = PgChartReads::Statements();
    read.max_lag = options_.read.max_lag;
    read.check_every = options_.read.check_every;
    read.on_change = options_.read.on_change;
    parts_->replica = std::make_unique<ReadReplica>(std::move(read));
    parts_->standby_chart =
        std::make_unique<PgChartReads>(parts_->replica->pool(), " on the standby");
    parts_->routed = std::make_unique<RoutedReads>(
        &parts_->chart, parts_->standby_chart.get(), parts_->replica.get());
  }
}

ChartReads& PgMetricStore::Reads() {
  if (parts_->routed != nullptr) return *parts_->routed;
  return parts_->chart;
}

ChartReads& PgMetricStore::PrimaryReads() { return parts_->chart; }

IngestStatistics PgMetricStore::GetIngestStatistics() const {
  return parts_->writer->Statistics();
}

size_t PgMetricStore::queued_values() const { return parts_->writer->queued_values(); }

ReadRoutingStatistics PgMetricStore::GetReadRoutingStatistics() const {
  return parts_->replica != nullptr ? parts_->replica->Statistics()
                                    : ReadRoutingStatistics();
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
      parts_->pool, operation, deadline,
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
  return parts_->trial.GetTrial(id, deadline);
}

absl::StatusOr<Trial> PgMetricStore::SetTrialState(int32_t id, TrialState state,
                                                   absl::Time deadline) {
  return Write<Trial>(
      parts_->pool, absl::StrCat("setting the state of trial ", id), deadline,
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
  return pg::BeginTrialRun(parts_->pool, trial_id, run_id, deadline);
}

absl::StatusOr<GenericWrite> PgMetricStore::WriteGenericReport(
    const GenericReport& report, absl::Time deadline) {
  return pg::WriteGenericReport(parts_->pool, report, deadline);
}

absl::StatusOr<std::vector<GenericRow>> PgMetricStore::ReadGenericReports(
    int32_t trial_id, absl::string_view group, int32_t after_batches,
    size_t limit, absl::Time deadline) {
  return pg::ReadGenericReports(parts_->pool, trial_id, group, after_batches, limit,
                                deadline);
}

absl::StatusOr<StreamStart> PgMetricStore::GetStreamStart(
    int32_t trial_id, absl::string_view stream_id, absl::Time deadline) {
  return parts_->trial.GetStreamStart(trial_id, stream_id, deadline);
}

absl::StatusOr<LatestValues> PgMetricStore::LatestValuesOfActiveTrials(
    size_t limit, int64_t live_since_us, absl::Time deadline) {
  return parts_->fleet.LatestValuesOfActiveTrials(limit, live_since_us, deadline);
}

absl::StatusOr<std::vector<AgentActivity>> PgMetricStore::AgentActivityOfTrials(
    const std::vector<int32_t>& trial_ids, absl::Time deadline) {
  return parts_->fleet.AgentActivityOfTrials(trial_ids, deadline);
}

absl::StatusOr<std::vector<StoredInventory>> PgMetricStore::InventoriesOfTrial(
    int32_t trial_id, absl::Time deadline) {
  return parts_->trial.InventoriesOfTrial(trial_id, deadline);
}

absl::StatusOr<std::vector<SeriesInfo>> PgMetricStore::ListSeriesOfEveryGroup(
    int32_t trial_id, absl::Time deadline) {
  return parts_->legacy.ListSeriesOfEveryGroup(trial_id, deadline);
}

absl::StatusOr<std::vector<Reading>> PgMetricStore::ReadReadings(
    int32_t trial_id, const SeriesInfo& series, ReadingCursor after,
    size_t limit, absl::Time deadline) {
  return parts_->legacy.ReadReadings(trial_id, series, after, limit, deadline);
}

std::unique_ptr<ChangeSubscription> PgMetricStore::SubscribeToChanges(
    int32_t trial_id, std::vector<std::string> agent_ids,
    std::function<void()> on_change) {
  return parts_->notifier.Subscribe(trial_id, std::move(agent_ids),
                             std::move(on_change));
}

absl::Status PgMetricStore::SubmitBatch(
    MetricBatch batch, absl::AnyInvocable<void(BatchOutcome) &&> done) {
  auto pending = std::make_unique<PendingBatch>();
  pending->rejection = ValidateBatch(batch, options_.limits, options_.clock());
  pending->batch = std::move(batch);
  pending->done = std::move(done);
  return parts_->writer->Submit(std::move(pending));
}

absl::Status PgMetricStore::CheckDatabase() {
  absl::MutexLock lock(&parts_->check_mu);
  DatabaseServerState state;
  absl::Status status = GuardPg("checking the database", [&]() -> absl::Status {
    parts_->check_mu.AssertHeld();  // tells the lock analysis: this runs here
    if (parts_->check_connection == nullptr) {
      // Bounded waits: a check must fail, not hang, when the network does.
      ASSIGN_OR_RETURN(std::string url,
                       WithConnectionOptions(options_.database_url,
                                             {{"connect_timeout", "3"},
                                              {"tcp_user_timeout", "3000"}}));
      ASSIGN_OR_RETURN(parts_->check_connection, Connect(url, "metricsd-readiness"));
    }
    pqxx::nontransaction tx(*parts_->check_connection);
    // The standbys' columns of pg_stat_replication are null to a role
    // without pg_monitor: then the counts are null too, not zero.
    const pqxx::row row = tx.exec1(
        "SELECT pg_is_in_recovery(),"
        " (SELECT CASE WHEN bool_and(sync_state IS NOT NULL) OR count(*) = 0"
        "   THEN count(*) FILTER (WHERE sync_state IN ('sync', 'quorum')) END"
        "  FROM pg_stat_replication),"
        " (SELECT coalesce(extract(epoch FROM max(replay_lag)), 0)::float8"
        "  FROM pg_stat_replication"
        "  HAVING bool_and(sync_state IS NOT NULL) OR count(*) = 0)");
    state.reached = true;
    state.primary = !row[0].as<bool>();
    if (!state.primary) {
      return absl::FailedPreconditionError(
          "the database server reached is a standby (in recovery), where "
          "nothing commits: with several hosts in --database-url, add "
          "target_session_attrs=read-write");
    }
    if (!row[1].is_null()) state.sync_standbys = row[1].as<int64_t>();
    if (!row[2].is_null()) state.standby_lag_seconds = row[2].as<double>();
    return absl::OkStatus();
  });
  // libpq's word when target_session_attrs=read-write found only standbys:
  // the database is there, its primary is not (a failover under way).
  if (absl::IsUnavailable(status) &&
      absl::StrContains(status.message(), "session is read-only")) {
    state.reached = true;
    status = absl::FailedPreconditionError(absl::StrCat(
        "no primary: the servers of the database URL that answer are "
        "standbys (", status.message(), ")"));
  }
  // A new connection next time: after a failure, and on a standby, as
  // libpq picks the server at connection time (a primary may be promoted).
  if (!status.ok()) parts_->check_connection.reset();
  absl::MutexLock state_lock(&parts_->state_mu);
  parts_->state = state;
  return status;
}

DatabaseServerState PgMetricStore::GetDatabaseServerState() const {
  absl::MutexLock lock(&parts_->state_mu);
  return parts_->state;
}

void PgMetricStore::Shutdown(absl::Time deadline) {
  parts_->writer->Shutdown(deadline);
  parts_->notifier.Shutdown();
  if (parts_->replica != nullptr) parts_->replica->Shutdown();
  parts_->pool.Shutdown();
}

}  // namespace metrics::storage::pg
