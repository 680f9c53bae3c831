// A batch in the ingest writer's queue: the batch, what the writer decided
// about it before the database, and how to answer its submitter.
//
// A batch that waits behind many others keeps its series labels packed
// meanwhile (PackSeries), as an ingest stream's batches keep theirs
// (DeclaredSeries). When thousands of agents start at once, each one's
// first batch waits for its series' registration, and every batch declares
// all its agent's series: 25 declarations of three std::string each are
// 2.4 KB of string headers alone, about 0.5 KB packed (docs/benchmarks.md,
// "Memory at thousands of streams").
//
// Thread-safety: thread-compatible; one thread owns it at a time.
#ifndef METRICS_STORAGE_PG_INGEST_PENDING_BATCH_H_
#define METRICS_STORAGE_PG_INGEST_PENDING_BATCH_H_

#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "absl/time/time.h"
#include "storage/metric_store.h"

namespace metrics::storage::pg {

struct PendingBatch {
  MetricBatch batch;
  // Not OK: refused before the database; only its sequence is recorded.
  absl::Status rejection;
  absl::AnyInvocable<void(BatchOutcome) &&> done;
  absl::Time submitted;  // for the commit latency

  // Moves batch.series into batch.declared, packed, releasing their
  // strings; nothing to do for a batch that shares its declarations.
  void PackSeries();
  // batch.declared, when it has the registry ids of batch's series already;
  // else null.
  const DeclaredSeries* KnownIds() const;
  // Gives batch.series its labels back from batch.declared, unless its ids
  // are known (the writer then needs no labels) or it has them.
  void UnpackSeries();
};

}  // namespace metrics::storage::pg

#endif  // METRICS_STORAGE_PG_INGEST_PENDING_BATCH_H_
