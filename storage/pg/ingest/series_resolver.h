// The series part of one group commit: turns the series a group's batches
// declare into registry ids with a fixed number of statements per group,
// whatever the number of batches. LookUp reads every series the cache
// lacks in one statement; Resolve then checks each batch in turn (units,
// the trial's series limit) and plans the new series; Register inserts all
// planned series in one statement and Complete gives each batch its ids;
// AddCounts adds what was registered to the trials' counters.
//
// The series limit stays exact across lanes and metricsd instances. With
// `lock_counts_early` a trial's counter row is locked when first needed and
// held to the commit (registrations in a trial queue behind each other).
// Without it the counter is read without a lock (series are never removed,
// so that is a lower bound: what it refuses is past the limit for sure) and
// only AddCounts, just before the commit, locks it; AddCounts then reports
// whether the sum passed the limit, and the caller decides again with the
// counts locked early.
//
// Thread-safety: thread-compatible; lives within one transaction.
#ifndef METRICS_STORAGE_PG_INGEST_SERIES_RESOLVER_H_
#define METRICS_STORAGE_PG_INGEST_SERIES_RESOLVER_H_

#include <pqxx/row>
#include <pqxx/transaction>

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "storage/metric_store.h"
#include "storage/pg/prepared.h"
#include "storage/pg/ingest/series_id_cache.h"

namespace metrics::storage::pg {

// A registry entry read or written by a transaction.
struct FoundSeries {
  int32_t trial_id;
  std::string metric_group, agent_id, gpu_uuid, name, unit;
  int64_t id;

  SeriesLabels labels() const {
    return {trial_id, metric_group, agent_id, gpu_uuid, name};
  }
};

class SeriesResolver {
 public:
  // `cache` holds committed entries and must outlive the resolver.
  SeriesResolver(pqxx::work& tx, const SeriesIdCache& cache,
                 int max_series_per_trial, bool lock_counts_early);

  // Reads the registry entries of `batches`' series that the cache lacks.
  void LookUp(const std::vector<const MetricBatch*>& batches);

  // Fills `ids` (parallel to batch.series) with the known ids and 0 for the
  // series this transaction will register, planning those. Refuses, with
  // nothing planned, a unit that differs from the registered (or planned)
  // one, or new series past the trial's limit.
  absl::Status Resolve(const MetricBatch& batch, std::vector<int64_t>& ids);

  // Inserts every planned series. A series another transaction registered
  // meanwhile is read instead, with that transaction's unit.
  void Register();

  // After Register: replaces the 0s of `ids` by the registered ids; refuses
  // the batch if another transaction registered one of them with another
  // unit.
  absl::Status Complete(const MetricBatch& batch, std::vector<int64_t>& ids) const;

  // Adds the registered series to the trials' counters. False: without
  // `lock_counts_early`, a counter passed the limit; the transaction must
  // not commit.
  bool AddCounts();

  // Entries read or registered by this transaction, by SeriesKey, for the
  // cache once it commits.
  const absl::flat_hash_map<std::string, FoundSeries>& found() const {
    return found_;
  }

  static std::vector<PreparedStatement> Statements();

 private:
  // The id and unit of a committed or found series, if known.
  std::optional<SeriesIdCache::Entry> Find(const MetricBatch& batch,
                                           size_t i) const;
  int64_t Registered(int32_t trial_id);
  // Reads the entries of `keys` (parallel arrays) into found_.
  // Adds a row of (series_id, trial_id, metric_group, agent_id, gpu_uuid,
  // name, unit) to found_.
  void Remember(const pqxx::row& row);
  void Read(const std::vector<int64_t>& trials,
            const std::vector<std::string>& groups,
            const std::vector<std::string>& agents,
            const std::vector<std::string>& gpus,
            const std::vector<std::string>& names);

  pqxx::work& tx_;
  const SeriesIdCache& cache_;
  const int max_series_per_trial_;
  const bool lock_counts_early_;
  absl::flat_hash_map<std::string, FoundSeries> found_;
  // Series to register, in the order declared (registry ids keep it: GPU
  // indexes are numbered by it): the batch and index, and by key.
  std::vector<std::pair<const MetricBatch*, size_t>> planned_;
  absl::flat_hash_map<std::string, size_t> planned_index_;
  // Per trial: the counter as read, the series planned, those inserted.
  absl::flat_hash_map<int32_t, int64_t> counted_;
  absl::flat_hash_map<int32_t, int64_t> planned_per_trial_;
  std::map<int32_t, int64_t> inserted_per_trial_;
};

}  // namespace metrics::storage::pg

#endif  // METRICS_STORAGE_PG_INGEST_SERIES_RESOLVER_H_
