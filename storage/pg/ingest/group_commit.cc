#include "storage/pg/ingest/group_commit.h"

#include <pqxx/result>
#include <pqxx/transaction>

#include <algorithm>
#include <map>
#include <optional>
#include <stdexcept>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "storage/declared_series.h"
#include "storage/format/packed_report.h"
#include "storage/pg/change_notifier.h"
#include "storage/pg/ingest/copy_rows.h"
#include "storage/pg/lock_keys.h"
#include "storage/pg/pg_errors.h"
#include "storage/pg/ingest/series_resolver.h"
#include "storage/pg/sql_arrays.h"

namespace metrics::storage::pg {

namespace {

using StreamKey = std::pair<int32_t, std::string>;  // (trial, stream id)

// The writer's statements, prepared on each writer connection.
struct CommitStatements {
  // A look-up by primary key per stream. As a join, the planner hashed
  // the keys and scanned every stream's position, a row per stream ever
  // ingested, in each group (docs/benchmarks.md, "Statements that stay
  // index probes"); the LIMIT (a key has one row) keeps the subquery from
  // being flattened into that join.
  PreparedStatement read_positions{
      "read_positions",
      "SELECT p.trial_id, p.stream_id, p.last_sequence "
      "FROM unnest($1::int[], $2::text[]) AS k(trial_id, stream_id) "
      "CROSS JOIN LATERAL (SELECT * FROM ingest_positions p "
      "WHERE p.trial_id = k.trial_id AND p.stream_id = k.stream_id "
      "LIMIT 1) p"};
  PreparedStatement read_trials{
      "read_trials",
      "SELECT id, state, run_id FROM trials WHERE id = ANY($1::int[]) "
      "ORDER BY id FOR SHARE"};
  // Advisory locks, taken in sorted order, so two writers never wait on
  // each other in a cycle. OFFSET 0 keeps the sorted subquery from being
  // flattened.
  PreparedStatement lock_keys{
      "lock_keys",
      "SELECT pg_advisory_xact_lock(k) FROM "
      "(SELECT k FROM unnest($1::bigint[]) AS k ORDER BY k OFFSET 0) s"};
  // '<trial> <agent>': a follower of one agent hears only its commits.
  PreparedStatement notify{
      "notify",
      "SELECT pg_notify($3, t::text || ' ' || a) "
      "FROM unnest($1::int[], $2::text[]) AS u(t, a)"};
  PreparedStatement write_positions{
      "write_positions",
      "INSERT INTO ingest_positions (trial_id, stream_id, last_sequence) "
      "SELECT * FROM unnest($1::int[], $2::text[], $3::bigint[]) "
      "ON CONFLICT (trial_id, stream_id) DO UPDATE "
      "SET last_sequence = excluded.last_sequence, updated_at = now()"};

  // The newest inventory of each agent replaces the one kept.
  PreparedStatement write_inventories{
      "write_inventories",
      "INSERT INTO agent_inventories (trial_id, agent_id, inventory) "
      "SELECT * FROM unnest($1::int[], $2::text[], $3::jsonb[]) "
      "ON CONFLICT (trial_id, agent_id) DO UPDATE "
      "SET inventory = excluded.inventory, received_at = now()"};

  std::vector<PreparedStatement> All() const {
    return {read_positions, read_trials, lock_keys, notify,
            write_positions, write_inventories};
  }
};

const CommitStatements& CommitSql() {
  static const auto* statements = new CommitStatements();
  return *statements;
}

}  // namespace

// The state of one Commit: what it read, decided and will write.
class GroupTransaction {
 public:
  // `lock_counts_early`: see SeriesResolver.
  GroupTransaction(GroupCommitter& committer, pqxx::work& tx,
                   bool lock_counts_early)
      : tx_(tx),
        series_(tx, committer.series_cache_, committer.max_series_per_trial_,
                lock_counts_early) {}

  // Empty when a trial's series count passed its limit through another
  // transaction meanwhile (see SeriesResolver): the transaction must not
  // commit.
  std::optional<std::vector<BatchOutcome>> Run(
      const std::vector<PendingBatch*>& group) {
    ReadPositions(group);
    ReadTrials(group);
    LookUpSeries(group);
    std::vector<BatchOutcome> outcomes;
    for (PendingBatch* pending : group) {
      outcomes.push_back(Decide(*pending, outcomes.size()));
    }
    RegisterSeries(outcomes);
    WriteRawRows();
    WritePositions();
    WriteInventories();
    Notify();
    if (!series_.AddCounts()) return std::nullopt;
    return outcomes;
  }

  // Once the transaction committed: the accepted batches' shared
  // declarations keep the ids it found or registered for them.
  void PublishIds() const {
    for (const Accepted& a : accepted_) {
      if (a.learns_ids != nullptr) a.learns_ids->PublishIds(a.series_ids);
    }
  }

  // Whether the ids of `agent`'s series belong in the writer's cache: not
  // when the agent's stream keeps them with its declarations.
  bool CachesAgent(const FoundSeries& found) const {
    return !kept_agents_.contains(
        AgentKey{found.trial_id, found.metric_group, found.agent_id});
  }

  // Series read or registered by this transaction, for the cache once it
  // commits.
  const absl::flat_hash_map<std::string, FoundSeries>& found_series() const {
    return series_.found();
  }

 private:
  struct Accepted {
    const MetricBatch* batch = nullptr;
    size_t outcome = 0;  // its index in the group
    // Its declarations' ids: known already, or parallel to its declarations.
    const DeclaredSeries* known = nullptr;
    std::vector<int64_t> series_ids;
    // Its shared declarations, when they learn their ids from this commit.
    const DeclaredSeries* learns_ids = nullptr;

    int64_t Id(size_t series) const {
      return known != nullptr ? known->id(series) : series_ids[series];
    }
  };
  using AgentKey = std::tuple<int32_t, absl::string_view, absl::string_view>;

  // Takes `keys`' advisory locks, held until the transaction ends.
  void Lock(std::vector<int64_t> keys) {
    std::sort(keys.begin(), keys.end());
    keys.erase(std::unique(keys.begin(), keys.end()), keys.end());
    tx_.exec_prepared(CommitSql().lock_keys.name, IntArray(keys));
  }

  void ReadPositions(const std::vector<PendingBatch*>& group) {
    std::vector<int64_t> trials, keys;
    std::vector<std::string> streams;
    for (const PendingBatch* p : group) {
      if (p->batch.stream_id.empty()) continue;
      trials.push_back(p->batch.trial_id);
      streams.push_back(p->batch.stream_id);
      keys.push_back(StreamLockKey(p->batch.trial_id, p->batch.stream_id));
    }
    if (trials.empty()) return;
    // A stream's lock keeps any other writer (a zombie metricsd still
    // committing a batch the client has since resent here) from committing
    // its batches until this transaction ends; the read after it sees what
    // that writer committed. A row lock on the position would not do: a new
    // stream has no row yet. Relies on the primary key (trial_id, stream_id).
    Lock(std::move(keys));
    for (const auto& row : tx_.exec_prepared(CommitSql().read_positions.name, IntArray(trials), TextArray(streams))) {
      positions_[{row[0].as<int32_t>(), row[1].as<std::string>()}] =
          row[2].as<int64_t>();
    }
  }

  void ReadTrials(const std::vector<PendingBatch*>& group) {
    std::vector<int64_t> ids;
    for (const PendingBatch* p : group) ids.push_back(p->batch.trial_id);
    // FOR SHARE: a trial cannot end while a batch for it commits.
    for (const auto& row : tx_.exec_prepared(CommitSql().read_trials.name, IntArray(ids))) {
      if (auto state = ParseTrialState(row[1].as<std::string>())) {
        TrialRow& trial = trials_[row[0].as<int32_t>()];
        trial.state = *state;
        if (!row[2].is_null()) trial.run_id = row[2].as<int32_t>();
      }
    }
  }

  // One look-up of the series the cache lacks, for the batches that may be
  // stored (not refused already, not duplicates).
  void LookUpSeries(const std::vector<PendingBatch*>& group) {
    std::vector<const MetricBatch*> batches;
    for (const PendingBatch* p : group) {
      if (!p->rejection.ok() || p->KnownIds() != nullptr) continue;
      const MetricBatch& batch = p->batch;
      if (!batch.stream_id.empty()) {
        const auto found = positions_.find({batch.trial_id, batch.stream_id});
        if (found != positions_.end() && batch.sequence <= found->second) {
          continue;
        }
      }
      batches.push_back(&batch);
    }
    series_.LookUp(batches);
  }

  BatchOutcome Decide(const PendingBatch& pending, size_t index) {
    const MetricBatch& batch = pending.batch;
    BatchOutcome outcome;
    outcome.sequence = batch.sequence;
    const bool streamed = !batch.stream_id.empty();
    if (!pending.rejection.ok() && (!streamed || batch.sequence <= 0)) {
      // No usable sequence number to record: just refuse it.
      outcome.kind = BatchOutcome::Kind::kRejected;
      outcome.status = pending.rejection;
      return outcome;
    }
    const StreamKey key{batch.trial_id, batch.stream_id};
    if (streamed) {
      const auto found = positions_.find(key);
      const int64_t position = found == positions_.end() ? 0 : found->second;
      if (batch.sequence <= position) {
        outcome.kind = BatchOutcome::Kind::kDuplicate;
        return outcome;
      }
      if (batch.sequence > position + 1 && !batch.sequence_is_time) {
        outcome.kind = BatchOutcome::Kind::kFailed;
        outcome.status = absl::FailedPreconditionError(absl::StrCat(
            "batch.sequence ", batch.sequence, ": stream \"", batch.stream_id,
            "\" expects sequence ", position + 1, " next"));
        return outcome;
      }
    }
    absl::Status refusal = pending.rejection;
    Accepted accepted;
    accepted.batch = &batch;
    accepted.outcome = index;
    if (refusal.ok()) refusal = CheckTrial(batch);
    if (refusal.ok()) {
      accepted.known = pending.KnownIds();
      if (accepted.known == nullptr) {
        refusal = series_.Resolve(batch, accepted.series_ids);
        if (batch.declared != nullptr &&
            batch.declared->Of(batch.trial_id, batch.metric_group,
                               batch.agent_id)) {
          accepted.learns_ids = batch.declared.get();
        }
      }
      if (batch.declared != nullptr && batch.declared->kept_by_stream()) {
        kept_agents_.insert(
            AgentKey{batch.trial_id, batch.metric_group, batch.agent_id});
      }
    }
    if (streamed && (refusal.ok() || !batch.sequence_is_time)) {
      positions_[key] = batch.sequence;
      advanced_[key] = batch.sequence;
    }
    if (!refusal.ok()) {
      outcome.kind = BatchOutcome::Kind::kRejected;
      outcome.status = std::move(refusal);
      return outcome;
    }
    accepted_.push_back(std::move(accepted));
    outcome.kind = BatchOutcome::Kind::kStored;
    return outcome;
  }

  absl::Status CheckTrial(const MetricBatch& batch) const {
    const auto found = trials_.find(batch.trial_id);
    if (found == trials_.end()) {
      return absl::NotFoundError(absl::StrCat(
          "batch.trial_id: trial ", batch.trial_id, " does not exist"));
    }
    const TrialRow& trial = found->second;
    if (batch.run_id && trial.run_id && *batch.run_id < *trial.run_id) {
      return OlderRunError(batch.trial_id, *batch.run_id, *trial.run_id);
    }
    if (batch.backfill) return absl::OkStatus();
    return CheckTrialTakesMetrics("batch.trial_id", batch.trial_id, trial.state);
  }

  // Registers the planned series, then gives the accepted batches their
  // ids; refuses those whose series another transaction registered
  // meanwhile with another unit.
  void RegisterSeries(std::vector<BatchOutcome>& outcomes) {
    series_.Register();
    std::vector<Accepted> kept;
    for (Accepted& a : accepted_) {
      absl::Status complete = series_.Complete(*a.batch, a.series_ids);
      if (complete.ok()) {
        kept.push_back(std::move(a));
        continue;
      }
      outcomes[a.outcome].kind = BatchOutcome::Kind::kRejected;
      outcomes[a.outcome].status = std::move(complete);
    }
    accepted_.swap(kept);
  }

  void WriteRawRows() {
    if (accepted_.empty()) return;
    // Straight into the partition: COPY into the parent would route each
    // row through the partition key for nothing.
    CopyRows copy(tx_, "metrics_profiling",
                  {"trial_id", "partition_type", "metric_group", "agent_id",
                   "end_time", "total_batches", "packed_values"});
    std::vector<SeriesValue> values;
    std::string packed;
    for (const Accepted& a : accepted_) {
      for (const Report& report : a.batch->reports) {
        values.clear();
        for (size_t v = 0; v < report.values.size(); ++v) {
          values.emplace_back(a.Id(report.series[v]), report.values[v]);
        }
        // Ids registered in declaration order come sorted already.
        if (!std::is_sorted(values.begin(), values.end())) {
          std::sort(values.begin(), values.end());
        }
        copy.Int(a.batch->trial_id)
            .Text("PROFILING")
            .Text(a.batch->metric_group)
            .Text(a.batch->agent_id)
            .Timestamp(report.time_us);
        if (report.batch.has_value()) {
          copy.Int(*report.batch);
        } else {
          copy.Null();
        }
        // Not in the rollups: the sealer adds it (packed_report.h).
        PackReportInto(values, packed, RollupState::kPending);
        copy.Bytea(packed);
        copy.EndRow();
      }
    }
    copy.Complete();
  }

  // Followers of these trials' agents (in any metricsd) learn of the new
  // data when this transaction commits.
  void Notify() {
    std::vector<std::pair<int64_t, absl::string_view>> agents;
    for (const Accepted& a : accepted_) {
      agents.emplace_back(a.batch->trial_id, a.batch->agent_id);
    }
    std::sort(agents.begin(), agents.end());
    agents.erase(std::unique(agents.begin(), agents.end()), agents.end());
    if (agents.empty()) return;
    std::vector<int64_t> trials;
    std::vector<std::string> agent_ids;
    for (const auto& [trial, agent] : agents) {
      trials.push_back(trial);
      agent_ids.emplace_back(agent);
    }
    tx_.exec_prepared(CommitSql().notify.name, IntArray(trials), TextArray(agent_ids),
                      std::string(kIngestChannel));
  }

  void WritePositions() {
    if (advanced_.empty()) return;
    std::vector<int64_t> trials, sequences;
    std::vector<std::string> streams;
    for (const auto& [key, sequence] : advanced_) {
      trials.push_back(key.first);
      streams.push_back(key.second);
      sequences.push_back(sequence);
    }
    tx_.exec_prepared(CommitSql().write_positions.name, IntArray(trials), TextArray(streams), IntArray(sequences));
  }

  void WriteInventories() {
    // One row per agent, the group's last (an upsert may not touch a row
    // twice in one statement).
    std::map<std::pair<int32_t, absl::string_view>, const AgentInventory*>
        newest;
    for (const Accepted& a : accepted_) {
      if (a.batch->inventory != nullptr) {
        newest[{a.batch->trial_id, a.batch->agent_id}] = a.batch->inventory.get();
      }
    }
    if (newest.empty()) return;
    std::vector<int64_t> trials;
    std::vector<std::string> agents, documents;
    for (const auto& [key, inventory] : newest) {
      trials.push_back(key.first);
      agents.emplace_back(key.second);
      documents.push_back(InventoryToJson(*inventory));
    }
    tx_.exec_prepared(CommitSql().write_inventories.name, IntArray(trials),
                      TextArray(agents), TextArray(documents));
  }

  pqxx::work& tx_;
  SeriesResolver series_;
  std::map<StreamKey, int64_t> positions_;
  std::map<StreamKey, int64_t> advanced_;
  struct TrialRow {
    TrialState state = TrialState::kActive;
    std::optional<int32_t> run_id;
  };
  absl::flat_hash_map<int32_t, TrialRow> trials_;
  std::vector<Accepted> accepted_;
  absl::flat_hash_set<AgentKey> kept_agents_;
};

absl::StatusOr<std::vector<BatchOutcome>> GroupCommitter::Commit(
    pqxx::connection& conn, const std::vector<PendingBatch*>& group) {
  return GuardPg(
      "committing ingest batches",
      [&]() -> absl::StatusOr<std::vector<BatchOutcome>> {
        for (bool lock_counts_early : {false, true}) {
          pqxx::work tx(conn);
          GroupTransaction work(*this, tx, lock_counts_early);
          std::optional<std::vector<BatchOutcome>> outcomes = work.Run(group);
          if (!outcomes.has_value()) continue;  // `tx` rolls back
          tx.commit();
          work.PublishIds();
          for (const auto& [key, found] : work.found_series()) {
            if (work.CachesAgent(found)) {
              series_cache_.Insert(found.labels(), found.id, found.unit);
            }
          }
          return *std::move(outcomes);
        }
        throw std::logic_error("a series limit race with the count locked");
      });
}

std::vector<PreparedStatement> GroupCommitter::Statements() {
  std::vector<PreparedStatement> all = CommitSql().All();
  for (PreparedStatement& s : SeriesResolver::Statements()) {
    all.push_back(std::move(s));
  }
  return all;
}

std::vector<SessionSetting> GroupCommitter::SessionSettings() {
  std::vector<SessionSetting> settings = KeyedAccessSettings();
  settings.push_back({"plan_cache_mode", "force_generic_plan"});
  return settings;
}

}  // namespace metrics::storage::pg
