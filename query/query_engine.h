// The query layer: lists a trial's series and answers time-bucketed queries
// from the store's rollups (or raw samples for short windows), exactly:
// every returned bucket holds the count, sum, min, max, first and last of
// the raw samples whose time falls in it. No SQL and no gRPC here; the
// server maps requests and results to and from protos.
//
// Thread-safety: thread-safe (the reads are).
#ifndef METRICS_QUERY_QUERY_ENGINE_H_
#define METRICS_QUERY_QUERY_ENGINE_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/blocking_executor.h"
#include "query/plan.h"
#include "query/query_options.h"
#include "storage/metric_store.h"

namespace metrics::query {

struct QueryRequest {
  int32_t trial_id = 0;
  // Which series: each list empty means any value of that label.
  std::vector<std::string> names;
  std::vector<std::string> agent_ids;
  std::vector<std::string> gpu_uuids;  // "" selects agent-wide series
  // [start, end); unset means the selected series' whole extent.
  std::optional<absl::Time> start;
  std::optional<absl::Time> end;
  std::optional<int> max_points;  // unset: the default
  // Set: answer at exactly this bucket width (0: raw points), whatever the
  // window and max_points; for following a query at its first resolution.
  std::optional<int64_t> resolution_us;
};

// One series' answer in columns; bucket i is [bucket_start_us[i],
// bucket_start_us[i] + resolution_us). For raw points (resolution_us 0) each
// entry is one sample: count 1, all values equal, times equal.
struct SeriesData {
  storage::SeriesInfo series;
  int64_t resolution_us = 0;
  std::vector<int64_t> bucket_start_us;
  std::vector<int64_t> count;
  std::vector<double> sum;
  std::vector<double> min;
  std::vector<double> max;
  std::vector<double> mean;
  std::vector<int64_t> first_time_us;
  std::vector<double> first_value;
  std::vector<int64_t> last_time_us;
  std::vector<double> last_value;
};

// Appends one bucket (its start and stats) to `out`'s columns.
void AppendBucket(SeriesData& out, int64_t bucket_start_us, const storage::RollupStats& stats);

struct QueryResult {
  // The window answered (after defaults); both 0 when nothing is stored.
  int64_t start_us = 0;
  int64_t end_us = 0;
  std::vector<SeriesData> series;
  // Raw points were wanted but retention removed them: the finest rollup
  // answered instead.
  bool raw_expired = false;
};

// The checks Query makes of a request's window (start before end) and
// selection (well-formed labels): INVALID_ARGUMENT naming the field.
absl::Status ValidateWindowAndSelection(const QueryRequest& request);

// Whether `series` is among those `request`'s lists select.
bool IsSelected(const QueryRequest& request, const storage::SeriesInfo& series);

// The series a request selects, in ListSeries' order, and the window it
// asks for: [start, end), where unset the selected series' extent (empty,
// from_us >= to_us, when nothing is stored).
struct Selection {
  std::vector<storage::SeriesInfo> series;
  int64_t from_us = 0;
  int64_t to_us = 0;
};

// Widens [first, last] to take in `series`' extent (if it has one).
void WidenExtent(std::optional<int64_t>& first_us, std::optional<int64_t>& last_us,
                 const storage::SeriesInfo& series);

// The window [from, to) a request asks for: its bounds where set, else the
// extent [first, last + 1); 0 for an end with neither.
std::pair<int64_t, int64_t> WindowOf(const std::optional<absl::Time>& start,
                                     const std::optional<absl::Time>& end,
                                     std::optional<int64_t> first_us,
                                     std::optional<int64_t> last_us);

// Checks the request (ValidateWindowAndSelection), then lists the trial's
// series (NOT_FOUND for an unknown trial) and selects.
absl::StatusOr<Selection> SelectSeries(storage::ChartReads& reads, const QueryRequest& request,
                                       absl::Time deadline);

class QueryEngine {
 public:
  // `reads` (a store's Reads() or PrimaryReads()) must outlive the engine.
  QueryEngine(storage::ChartReads* reads, QueryOptions options);

  const QueryOptions& options() const { return options_; }

  // Every series of the trial with its extent and count. NOT_FOUND for an
  // unknown trial.
  absl::StatusOr<std::vector<storage::SeriesInfo>> ListSeries(
      int32_t trial_id, absl::Time deadline);

  // INVALID_ARGUMENT for start not before end, max_points out of range, or
  // a malformed label in the selection; NOT_FOUND for an unknown trial. No
  // matching series or no data is an empty answer, not an error.
  absl::StatusOr<QueryResult> Query(const QueryRequest& request,
                                    absl::Time deadline);

  // The stored rollups of `series` (of one trial) at `plan`'s stored width
  // in its read window, handed to `sink` ordered by agent and bucket start:
  // the read of stored buckets Query makes, for callers that merge them
  // otherwise (summaries). REQUIRES: plan.stored_width_s > 0.
  absl::Status ReadStored(int32_t trial_id, const std::vector<storage::SeriesInfo>& series,
                          const Plan& plan, absl::Time deadline, storage::RollupSink& sink);

  // Runs `here`, and `there` meanwhile on one of the side-read threads
  // when one is free (else after `here`, on the caller).
  void RunAlongside(absl::FunctionRef<void()> here, absl::FunctionRef<void()> there);

 private:
  storage::ChartReads* const reads_;
  const QueryOptions options_;
  const std::unique_ptr<common::BlockingExecutor> side_reads_;  // null: none
};

}  // namespace metrics::query

#endif  // METRICS_QUERY_QUERY_ENGINE_H_
