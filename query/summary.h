// Summaries: each metric of one or more trials pooled across GPUs (and
// agents) into one series per trial (comparing runs) or per agent (every
// node of a trial at once). A pooled bucket holds every sample of its
// series in that bucket: count and sum add up, min and max are the extremes
// of all of them, so one GPU's stall on one node shows in its summary's
// min; first and last are the earliest and latest samples, and at equal
// times (the GPUs of one report) the first GPU's first value and the last
// GPU's last value, by agent and then the store's order of series. The
// trials share one bucket width; in relative time each trial's window
// starts at its own start, aligned down to that width, so bucket k of every
// trial is the same time into its run.
//
// Stored rows of a trial of many agents are read in two halves at once, on
// the calling thread and one of the engine's side-read threads when one is
// free (else one after the other).
//
// Thread-safety: thread-safe (the engine is).
#ifndef METRICS_QUERY_SUMMARY_H_
#define METRICS_QUERY_SUMMARY_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "query/query_engine.h"

namespace metrics::query {

// Trials one summary request may name at most.
inline constexpr int kMaxSummaryTrials = 8;

struct SummaryRequest {
  std::vector<int32_t> trial_ids;  // 1 to kMaxSummaryTrials, distinct
  bool by_agent = false;           // else one series per trial and metric
  std::vector<std::string> names;      // empty: every metric
  std::vector<std::string> agent_ids;  // empty: every agent
  // Set: only the GPU of this index on each agent (agent-wide series stay).
  std::optional<int> gpu_index;
  // Wall-clock window [start, end); unset ends are the trials' extent.
  std::optional<absl::Time> start;
  std::optional<absl::Time> end;
  // Relative window: offsets from each trial's start (its first sample),
  // [offset_start, offset_end); unset ends are 0 and the longest trial's
  // length. Relative and wall-clock bounds do not mix.
  bool relative = false;
  std::optional<absl::Duration> offset_start;
  std::optional<absl::Duration> offset_end;
  std::optional<int> max_points;  // per series; unset: the default
};

struct SummarySeries {
  int32_t trial_id = 0;
  // data.series: agent_id is "" for a trial's summary; gpu_uuid is "" and
  // series_id 0; name and unit are the pooled series'.
  SeriesData data;
  int gpu_count = 0;    // GPU series pooled (0: an agent-wide metric)
  int agent_count = 0;  // agents pooled
  // The trial's start aligned down to the bucket width (relative answers;
  // else 0): bucket_start_us - origin_us is the time into the run.
  int64_t origin_us = 0;
};

struct SummaryResult {
  // The window: wall-clock microseconds, or offsets in relative answers;
  // both 0 when nothing is stored.
  int64_t start_us = 0;
  int64_t end_us = 0;
  int64_t resolution_us = 0;
  // By trial in the request's order, then agent, name and unit.
  std::vector<SummarySeries> series;
  bool raw_expired = false;  // as QueryResult's
};

// INVALID_ARGUMENT naming the field for a bad request (no trial, too many,
// a repeated or non-positive id, mixed or inverted bounds, a negative GPU
// index, a malformed label, max_points out of range); NOT_FOUND naming an
// unknown trial.
absl::StatusOr<SummaryResult> Summarize(QueryEngine& engine,
                                        const SummaryRequest& request,
                                        absl::Time deadline);

}  // namespace metrics::query

#endif  // METRICS_QUERY_SUMMARY_H_
