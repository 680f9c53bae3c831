// Builds the store's batches from values one at a time: the one way every
// door that takes someone else's shape (OTLP, the legacy post, the legacy
// move, the platform's ReportTrialMetrics) turns it into MetricBatches, so
// all apply the same rules:
// - a batch per (trial, agent, metric group), its series declared once;
// - a report per instant (and training batch): values of one time share it;
// - a series repeated at one instant starts another report at that instant,
//   so both values are kept (the rollups count both);
// - each value is checked as the store checks a batch (labels, unit, time,
//   finite), and a value the store would refuse is refused alone, with the
//   reason;
// - the batches are split at the ingest limits (reports, values and series
//   per batch); a report with more series than a batch may declare is split
//   into reports of the same instant. So a request of any size is stored
//   whole.
//
// Usage:
//   BatchBuilder builder(limits, absl::Now());
//   if (absl::Status s = builder.Add({trial, agent, "system"},
//                                    {"gpu_util", uuid, "percent", t, {}, v});
//       !s.ok()) { ... the reason, e.g. to count or to name with a field ... }
//   std::vector<MetricBatch> batches = std::move(builder).Take();
//
// Thread-safety: thread-compatible.
#ifndef METRICS_STORAGE_BATCH_BUILDER_H_
#define METRICS_STORAGE_BATCH_BUILDER_H_

#include <cstdint>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "storage/batch_validation.h"
#include "storage/metric_store.h"

namespace metrics::storage {

// Which batch a value goes to.
struct BatchTarget {
  int32_t trial_id = 0;
  absl::string_view agent_id;
  absl::string_view metric_group = kSystemGroup;
};

// One value and its series.
struct BuiltValue {
  absl::string_view name;
  absl::string_view gpu_uuid;  // empty for an agent-wide series
  absl::string_view unit;
  int64_t time_us = 0;
  std::optional<int32_t> training_batch;  // the legacy readings' batch index
  double value = 0;
};

class BatchBuilder {
 public:
  // `now` bounds report times as the store does (limits.max_future ahead
  // at most).
  BatchBuilder(const IngestLimits& limits, absl::Time now)
      : limits_(limits), latest_(now + limits.max_future) {}

  // Adds `value` to its target's batch. INVALID_ARGUMENT with the reason
  // (naming the label, series or time, not a request's field: callers add
  // that) when the store would refuse it: a trial id not positive, a metric
  // group not system, timing or misc, an agent id, name, GPU UUID or unit
  // that is no valid label, a series given another unit earlier, a time
  // before 2000 or too far ahead, a value not finite. Nothing is added then.
  absl::Status Add(const BatchTarget& target, const BuiltValue& value);

  // The values added so far.
  int64_t value_count() const { return values_; }

  // The batches, in the order their targets first came; each part of a
  // target's values declares only its own series and is within the limits.
  // Without stream ids (callers set those they need).
  std::vector<MetricBatch> Take() &&;

 private:
  using TargetKey = std::tuple<int32_t, std::string, std::string>;
  using SeriesKey = std::pair<std::string, std::string>;  // (name, GPU)
  using InstantKey = std::pair<int64_t, std::optional<int32_t>>;

  struct Pending {
    MetricBatch whole;  // every series and report, unsplit
    absl::flat_hash_map<SeriesKey, uint32_t> series_of;
    // The reports of each instant, in the order they were started.
    absl::flat_hash_map<InstantKey, std::vector<size_t>> reports_at;
    // (report << 32 | series): which report already has which series.
    absl::flat_hash_set<uint64_t> filled;
  };

  // The target's pending batch, made (its labels checked) when new.
  absl::StatusOr<size_t> PendingOf(const BatchTarget& target);
  // The series' index in `p`, declared (its labels checked) when new.
  absl::StatusOr<uint32_t> SeriesOf(Pending& p, const BuiltValue& value);
  std::vector<MetricBatch> Split(MetricBatch whole) const;

  const IngestLimits limits_;
  const absl::Time latest_;
  std::vector<Pending> pending_;
  absl::flat_hash_map<TargetKey, size_t> pending_of_;
  // The last target and series a value went to: values come grouped by
  // them, so most skip the look-ups.
  struct Last {
    int32_t trial_id;
    std::string agent_id, metric_group, name, gpu_uuid;
    size_t pending;
    uint32_t series;
  };
  std::optional<Last> last_;
  int64_t values_ = 0;
};

}  // namespace metrics::storage

#endif  // METRICS_STORAGE_BATCH_BUILDER_H_
