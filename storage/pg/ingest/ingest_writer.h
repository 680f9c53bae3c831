// The bounded group-commit writer (in the manner of osm2pgsql's db-copy):
// batches queue in lanes, each lane a thread with its own connection, which
// takes everything queued (up to a group size) and commits it in one
// transaction (GroupCommitter). While a stream has batches in a lane, its
// next ones go there too, so they commit in order. A new stream goes to the
// lane with the fewest values in flight, so a few busy streams spread over
// the lanes instead of sharing one by the luck of a hash; an idle one goes
// back to its lane (whose series cache knows it) unless that lane is far
// busier than the other.
//
// Backpressure: the queue is bounded by the number of values it holds;
// Submit refuses (RESOURCE_EXHAUSTED) rather than grow it. Failures: a lane
// reconnects and retries a group while the database is unreachable, out of
// resources (its disk full) or a transaction aborts (deadlock,
// serialization), for up to retry_for, and Statistics says since when
// (stalled_since); a retried group is safe because the stream positions
// make already-committed batches duplicates. A group that fails for another reason is split so one
// bad batch cannot fail the others.
//
// Thread-safety: thread-safe. Callbacks run on lane threads.
#ifndef METRICS_STORAGE_PG_INGEST_INGEST_WRITER_H_
#define METRICS_STORAGE_PG_INGEST_INGEST_WRITER_H_

#include <atomic>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/histogram.h"
#include "storage/metric_store.h"
#include "storage/pg/ingest/group_commit.h"
#include "storage/pg/ingest/ingest_writer_options.h"

namespace metrics::storage::pg {


class IngestWriter {
 public:
  explicit IngestWriter(IngestWriterOptions options);
  // Shuts down with no grace if still running.
  ~IngestWriter();

  IngestWriter(const IngestWriter&) = delete;
  IngestWriter& operator=(const IngestWriter&) = delete;

  // Queues `batch`; its `done` runs once, on a lane thread, when its
  // transaction ends. Never blocks. RESOURCE_EXHAUSTED (and `done` is not
  // called) when the queue is full; UNAVAILABLE after Shutdown.
  absl::Status Submit(std::unique_ptr<PendingBatch> batch);

  // Refuses new batches, commits the queued ones until `deadline`, fails
  // the rest with UNAVAILABLE, and joins the lanes. Idempotent.
  void Shutdown(absl::Time deadline);

  size_t queued_values() const { return queued_values_.load(); }
  // Thread-safe.
  IngestStatistics Statistics() const;

 private:
  class Lane;
  // Where a stream's (or, without one, an agent's) batches go.
  using RouteKey = std::pair<int32_t, std::string>;
  struct Route {
    size_t lane;
    int batches;  // in flight there
  };
  // How much busier than the least busy lane an idle stream's lane may be
  // and still take it back: a few fan-in batches, far less than a bulk one.
  static constexpr size_t kRouteSlackValues = 10000;
  static RouteKey RouteOf(const MetricBatch& batch);
  // The lane for `batch`, counted in flight there.
  size_t Assign(const MetricBatch& batch, size_t values)
      ABSL_LOCKS_EXCLUDED(routes_mu_);
  // Undoes Assign once the batch's transaction ended (or it was not queued).
  void Release(const MetricBatch& batch, size_t lane, size_t values)
      ABSL_LOCKS_EXCLUDED(routes_mu_);
  // Counts a batch's outcome; runs on a lane thread.
  void Count(const BatchOutcome& outcome, size_t values, double seconds);
  // A lane's commit was refused with `error` and will be retried; or it
  // commits again.
  void NoteStalled(int lane, const absl::Status& error) ABSL_LOCKS_EXCLUDED(stall_mu_);
  void NoteCommitting(int lane) ABSL_LOCKS_EXCLUDED(stall_mu_);

  const IngestWriterOptions options_;
  std::atomic<size_t> queued_values_{0};
  std::atomic<size_t> queued_batches_{0};
  std::atomic<int64_t> stored_batches_{0};
  std::atomic<int64_t> stored_values_{0};
  std::atomic<int64_t> duplicate_batches_{0};
  std::atomic<int64_t> rejected_batches_{0};
  std::atomic<int64_t> failed_batches_{0};
  common::Histogram commit_seconds_{common::Histogram::LatencyBounds()};
  std::atomic<bool> accepting_{true};
  absl::Mutex routes_mu_;
  absl::flat_hash_map<RouteKey, Route> routes_ ABSL_GUARDED_BY(routes_mu_);
  std::vector<size_t> lane_values_ ABSL_GUARDED_BY(routes_mu_);  // in flight
  mutable absl::Mutex stall_mu_;
  struct Stall {
    absl::Time since;
    bool full_disk = false;
  };
  std::vector<std::optional<Stall>> stalls_ ABSL_GUARDED_BY(stall_mu_);  // by lane
  std::vector<std::unique_ptr<Lane>> lanes_;
};

}  // namespace metrics::storage::pg

#endif  // METRICS_STORAGE_PG_INGEST_INGEST_WRITER_H_
