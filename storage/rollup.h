// Rollups: mergeable aggregates of a series' samples per time bucket (count,
// sum, min, max, first and last point), stored at a few fixed bucket widths.
// A coarser bucket is computed exactly from finer ones, and late or
// out-of-order samples merge in exactly, which is what lets a query answer
// from stored buckets with the same result as a scan of the raw rows.
//
// The store keeps one row per (trial, agent, width, bucket) holding the
// stats of every series of that agent, packed (rollup_codec.h): one row per
// agent instead of one per series keeps the upkeep within the ingest
// transaction cheap (25 series of an agent cost one row write, not 25).
//
// Ingest writes no rollups: a report's raw row waits, marked as not in the
// rollups (packed_report.h), until the sealer adds its window to every width
// in the transaction that seals it; a reader of rollups adds the raw rows
// still waiting (docs/storage.md, "Rollups").
//
// Folding (earlier versions): ingest kept a 10 s width and added a report to
// the agent's newest 10 s bucket alone, leaving it "unfolded"
// (rollup_codec.h), its samples not yet in the coarser widths. A reader of
// a coarser width still adds each agent's unfolded bucket to the bucket
// holding it, until the agent's first seal folds it.
//
// First and last: among samples with equal times, the one ingested later
// counts as later (first keeps the earlier, last takes the later).
//
// Thread-safety: values and pure functions.
#ifndef METRICS_STORAGE_ROLLUP_H_
#define METRICS_STORAGE_ROLLUP_H_

#include <cstdint>
#include <utility>
#include <vector>

#include "absl/container/btree_map.h"

namespace metrics::storage {

// The stored bucket widths, in seconds, finest first; buckets are aligned to
// multiples of the width since the Unix epoch. Neighbours differ by at most
// 10x, so a query reads at most about 10 stored buckets per bucket it
// returns; the 2 h width keeps long runs (weeks to months at 1000 points)
// near 1-2 stored buckets per returned one. Below a minute, charts read the
// raw samples: a sealed window decodes at about a microsecond a value, and
// the 10 s width cost 2.2 bytes a value (docs/benchmarks.md, "Storage: `bench/storage.sh`").
inline constexpr int kRollupWidthsSeconds[] = {60, 600, 3600, 7200, 21600};
// The finest width of earlier versions, whose rows may still be stored.
inline constexpr int kLegacyFinestWidthSeconds = 10;

struct RollupStats {
  int64_t count = 0;
  double sum = 0;
  double min = 0;
  double max = 0;
  int64_t first_time_us = 0;  // microseconds since the epoch
  double first_value = 0;
  int64_t last_time_us = 0;
  double last_value = 0;

  // Adds one sample; samples are added in ingest order.
  void Add(int64_t time_us, double value);
  // Merges `later`, whose samples were ingested after this one's.
  void Merge(const RollupStats& later);

  bool operator==(const RollupStats& other) const;
};

// The stats of every series of one agent in one bucket, by series id.
using AgentRollup = absl::btree_map<int64_t, RollupStats>;

// Merges `later` into `into` series by series.
void MergeAgentRollup(AgentRollup& into, const AgentRollup& later);

// The same stats as a vector by series id ascending: what ingest gathers a
// bucket into (AgentRollup's btree takes a node per few series, which cost
// more to build and free than the stats did to gather).
using SortedRollup = std::vector<std::pair<int64_t, RollupStats>>;

// `earlier` and `later` merged series by series (both sorted by id).
SortedRollup MergeSortedRollups(const SortedRollup& earlier,
                                const SortedRollup& later);

// `time_us` rounded down to a multiple of `width_us` (floor, also before
// 1970): the start of the bucket of that width holding it.
int64_t AlignDown(int64_t time_us, int64_t width_us);

// The bucket of `width_s` seconds holding `time_us`.
inline int64_t BucketStartMicros(int64_t time_us, int width_s) {
  return AlignDown(time_us, int64_t{width_s} * 1000000);
}

}  // namespace metrics::storage

#endif  // METRICS_STORAGE_ROLLUP_H_
