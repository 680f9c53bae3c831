// A batch in the ingest writer's queue: the batch, what the writer decided
// about it before the database, and how to answer its submitter.
//
// A batch that waits behind many others can keep its series labels packed
// in one string meanwhile (PackSeries). When thousands of agents start at
// once, each one's first batch waits for its series' registration, and
// every batch declares all its agent's series: 25 declarations of three
// std::string each are 2.4 KB of string headers alone, about 0.5 KB packed
// (docs/benchmarks.md, "Memory at thousands of streams").
//
// Thread-safety: thread-compatible; one thread owns it at a time.
#ifndef METRICS_STORAGE_PG_INGEST_PENDING_BATCH_H_
#define METRICS_STORAGE_PG_INGEST_PENDING_BATCH_H_

#include <string>

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
  // batch.series while packed (and batch.series empty); else empty.
  std::string packed_series;

  // Moves batch.series into packed_series, releasing their strings.
  void PackSeries();
  // Restores batch.series as they were; nothing to do unless packed.
  void UnpackSeries();
};

}  // namespace metrics::storage::pg

#endif  // METRICS_STORAGE_PG_INGEST_PENDING_BATCH_H_
