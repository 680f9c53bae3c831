// The one reader of system_rollups rows for charts and extents. The stored
// widths lack an agent's newest 10 s bucket of an earlier version while it
// is unfolded (rollup.h: not merged upwards until the agent's first seal),
// so a read also takes that bucket, ordered after the rows of the same
// start, and keeps it only while it is marked unfolded. This file owns that rule: RollupRowsSql selects
// the rows, RollupRowDecoder decides which to keep and decodes them.
//
// Thread-safety: pure functions; a decoder is immutable after construction.
#ifndef METRICS_STORAGE_PG_READS_ROLLUP_ROWS_H_
#define METRICS_STORAGE_PG_READS_ROLLUP_ROWS_H_

#include <pqxx/row>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "storage/metric_store.h"

namespace metrics::storage::pg {

// A time window of bucket starts, [from_us, to_us).
struct BucketWindow {
  int64_t from_us = 0;
  int64_t to_us = 0;
};

// The rows of width `width_s` of the agents in `agents_sql` (an SQL text[]
// expression) of trial `trial_sql` (an SQL int expression), as agent_id,
// start_us, stats (bytea), width_s, ordered by agent, start and coarser
// width first. Without `window`, every bucket of the agents. Relies on the
// primary key (trial_id, agent_id, width_s, bucket_start): a range scan per
// agent, and one backward probe per agent for the unfolded bucket.
std::string RollupRowsSql(absl::string_view trial_sql,
                          absl::string_view agents_sql, int width_s,
                          std::optional<BucketWindow> window);

class RollupRowDecoder {
 public:
  // `wanted`: the series to keep (sorted ascending), or every series.
  RollupRowDecoder(int width_s, std::optional<BucketWindow> window,
                   std::optional<std::vector<int64_t>> wanted);

  // Decodes a row of RollupRowsSql into `out`, an unfolded 10 s bucket
  // placed at the start of the coarser bucket holding it. False for a row
  // to skip: a 10 s bucket already folded, or one outside the window.
  absl::StatusOr<bool> Decode(const pqxx::row& row, RollupRow& out) const;

 private:
  const int width_s_;
  const std::optional<BucketWindow> window_;
  const std::optional<std::vector<int64_t>> wanted_;
};

}  // namespace metrics::storage::pg

#endif  // METRICS_STORAGE_PG_READS_ROLLUP_ROWS_H_
