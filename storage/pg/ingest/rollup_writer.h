// The rollup half of a group commit: adds the accepted batches' samples to
// system_rollups in the group's transaction. Samples go into their finest
// buckets; an agent's newest finest bucket stays unfolded, and the coarser
// widths take a finest bucket once a newer one starts, a late report at
// once (rollup.h). Each bucket is merged with what is stored (stored
// samples were ingested earlier) and written back in place, under the
// agents' advisory locks, a chunk of agents at a time.
//
// Thread-safety: stateless between calls; a call runs on the caller's
// transaction.
#ifndef METRICS_STORAGE_PG_INGEST_ROLLUP_WRITER_H_
#define METRICS_STORAGE_PG_INGEST_ROLLUP_WRITER_H_

#include <pqxx/transaction>

#include <cstdint>
#include <functional>
#include <vector>

#include "storage/metric_store.h"
#include "storage/pg/prepared.h"

namespace metrics::storage::pg {

// An accepted batch, for its rollups: the batch, and the series id of each
// of its declared series (parallel to batch->series).
struct RollupInput {
  const MetricBatch* batch;
  const std::vector<int64_t>* series_ids;
};

class RollupWriter {
 public:
  // The statements Write runs, to prepare on each writer connection.
  static std::vector<PreparedStatement> Statements();

  // Adds the rollups of the system group's batches among `batches`, in
  // their order. `lock` takes advisory locks (held until `tx` ends): it is
  // given every agent's rollup key at once, before anything is read.
  // Throws (libpqxx, or std::runtime_error for a stored bucket that does
  // not decode or rows that changed under their lock): the group fails.
  static void Write(pqxx::work& tx, const std::vector<RollupInput>& batches,
                    const std::function<void(std::vector<int64_t>)>& lock);

 private:
  class Run;
};

}  // namespace metrics::storage::pg

#endif  // METRICS_STORAGE_PG_INGEST_ROLLUP_WRITER_H_
