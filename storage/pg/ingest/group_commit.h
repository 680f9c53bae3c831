// One group commit: many streams' batches in one transaction on one
// connection. For each batch, in order: skip it if its stream already has
// it, refuse it for good if it was refused before the database (validation),
// or if its trial is unknown or terminal, it is of an older run than the
// trial's newest, a unit changes, or the trial would pass its series limit;
// otherwise store it: raw rows into the profiling partition of `metrics` by
// COPY (as not yet in the rollups: the sealer adds them), new series into
// the registry, and the stream's position. A batch whose sequence number
// leaves a gap fails without using its number, unless its sequence is a
// report's time (MetricBatch::sequence_is_time). The series of all the
// group's batches are looked up and
// registered with a fixed number of statements (SeriesResolver); the
// trials' series counters are locked only just before the commit, and the
// group is decided again with them locked early if another transaction's
// registrations passed a limit meanwhile.
//
// Runs on a writer thread; the committer keeps a bounded cache of series
// ids (they never change once registered), filled only from committed
// transactions.
//
// Thread-safety: thread-compatible (one per writer thread).
#ifndef METRICS_STORAGE_PG_INGEST_GROUP_COMMIT_H_
#define METRICS_STORAGE_PG_INGEST_GROUP_COMMIT_H_

#include <string>
#include <vector>

#include <pqxx/connection>

#include "absl/status/statusor.h"
#include "storage/metric_store.h"
#include "storage/pg/connection.h"
#include "storage/pg/ingest/pending_batch.h"
#include "storage/pg/prepared.h"
#include "storage/pg/ingest/series_resolver.h"

namespace metrics::storage::pg {

class GroupCommitter {
 public:
  // Caches at most `max_cached_series` series ids (about 35 bytes each).
  GroupCommitter(int max_series_per_trial, size_t max_cached_series)
      : max_series_per_trial_(max_series_per_trial), series_cache_(max_cached_series) {}

  // Commits `group` in one transaction and returns each batch's outcome, in
  // order; or the error that aborted the transaction (nothing committed).
  absl::StatusOr<std::vector<BatchOutcome>> Commit(
      pqxx::connection& conn, const std::vector<PendingBatch*>& group);

  // The statements Commit runs, to prepare on each writer connection.
  static std::vector<PreparedStatement> Statements();
  // A writer connection's settings: KeyedAccessSettings, and generic plans
  // only. The statements take arrays whose lengths a custom plan knows, and
  // PostgreSQL kept choosing custom plans for most of them: it planned
  // the rollup look-up of the time at every call (pg_stat_statements.track_planning: 1652
  // plans in 1630 calls), in all about 4 % of the bulk ingest's PostgreSQL
  // CPU (docs/benchmarks.md, "Statements that stay index probes"). Their
  // generic plans are the same index probes (writer_plans_test).
  static std::vector<SessionSetting> SessionSettings();

 private:
  const int max_series_per_trial_;
  SeriesIdCache series_cache_;

  friend class GroupTransaction;
};

}  // namespace metrics::storage::pg

#endif  // METRICS_STORAGE_PG_INGEST_GROUP_COMMIT_H_
