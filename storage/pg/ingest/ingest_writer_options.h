// IngestWriter's options, apart from the writer so that a server's options
// name them without libpqxx.
//
// Thread-safety: a plain struct.
#ifndef METRICS_STORAGE_PG_INGEST_INGEST_WRITER_OPTIONS_H_
#define METRICS_STORAGE_PG_INGEST_INGEST_WRITER_OPTIONS_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>

#include "absl/status/status.h"
#include "absl/time/time.h"

namespace metrics::storage::pg {

struct IngestWriterOptions {
  std::string database_url;  // "" for the PG* variables
  // Lanes: threads and connections committing in parallel.
  int lanes = 2;
  // Values queued at most, across lanes (about 40 bytes of memory each).
  size_t max_queued_values = 4'000'000;
  // A group commit takes at most this many values (whole batches; a larger
  // batch goes alone).
  size_t max_group_values = 200'000;
  // ... and at most this many batches. Each brings its own stream position
  // and series look-ups, so a group's memory grows with its batches even
  // when they are small: thousands of agents each sending a
  // report a second would otherwise meet in groups of a thousand batches
  // after a stall (tens of MB each: docs/benchmarks.md, "Memory at
  // thousands of streams").
  // A hundred keep a commit short and still amortise its round trips.
  size_t max_group_batches = 100;
  // A batch submitted while this many batches or more are queued keeps its
  // series labels packed until its group commits (PendingBatch::
  // PackSeries): it will wait, and its labels are most of its memory. Below
  // it, a batch is likely in the next group, and packing would cost for
  // nothing.
  size_t pack_labels_after_batches = 100;
  // A lane that finds at least `linger_after_batches` batches queued when
  // it takes a group (a busy server: thousands of agents each sending a
  // report a second) waits up to `group_linger` for the group to fill,
  // while batches keep arriving. Fewer, larger commits cost far less per
  // batch: each commit's statements, round trips and WAL flush
  // (docs/benchmarks.md, "Groups that fill"). A quiet server's lane finds
  // one batch and commits at once, so its latency is unchanged. Two, not
  // more: a lane that commits quickly finds few batches queued even at 5000
  // agents. A zero `group_linger` turns it off.
  //
  // A silence ends the wait early: `linger_idle` without an arrival once the
  // group holds `linger_small_values` values or more (large batches, whose
  // senders may be waiting for this group's acknowledgements to send more,
  // and whose commit is worth its cost already); `linger_idle_small` while
  // it holds fewer (a fleet's one-report batches, sent on the agents' own
  // clocks: a pause of a few milliseconds between them says nothing).
  size_t linger_after_batches = 2;
  absl::Duration group_linger = absl::Milliseconds(20);
  absl::Duration linger_idle = absl::Milliseconds(2);
  size_t linger_small_values = 20'000;
  absl::Duration linger_idle_small = absl::Milliseconds(10);
  // How long to keep retrying a group while the database is unreachable.
  absl::Duration retry_for = absl::Seconds(30);
  int max_series_per_trial = 10000;
  // Series ids each lane caches at most (about 35 bytes each); past it the
  // cache is cleared whole and a miss costs a look-up.
  size_t max_cached_series = 200'000;
  // Streams whose lane the writer remembers at most (about 100 bytes
  // each); past it idle ones are forgotten.
  size_t max_routes = 100'000;
  // Called on a lane thread after each commit that stored a batch of
  // system reports, with its trial, agent and report count (optional):
  // the sealer's SealTrigger counts what waits to be sealed.
  std::function<void(int32_t trial, const std::string& agent, int64_t reports)> on_stored;
  // Asked before a batch of system reports is queued (optional): an error
  // refuses it (the sealer's SealTrigger refuses an agent with far more
  // rows waiting for their seal than it lets wait, RESOURCE_EXHAUSTED).
  std::function<absl::Status(int32_t trial, const std::string& agent)> admit;
};

}  // namespace metrics::storage::pg

#endif  // METRICS_STORAGE_PG_INGEST_INGEST_WRITER_OPTIONS_H_
