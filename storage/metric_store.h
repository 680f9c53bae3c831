// The store of the metrics service: trials, the ingest of system-metric
// batches, the reads that queries are built from (series, stored rollups,
// raw samples) and notifications of change. MetricStore is the interface
// the server and query layers use, its methods grouped by their callers;
// PgMetricStore (storage/pg/) is its one implementation, on PostgreSQL.
// Tests use the real store (no fake); FaultInjectingMetricStore wraps it to
// inject failures and delays.
//
// Times: every instant in these types and calls is int64 microseconds since
// the Unix epoch (names end in _us), PostgreSQL's own resolution, so the
// store never rounds one; the server converts at its edge. Deadlines are
// absl::Time: they bound a call and are never stored.
//
// Thread-safety: implementations are thread-safe.
#ifndef METRICS_STORAGE_METRIC_STORE_H_
#define METRICS_STORAGE_METRIC_STORE_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "common/histogram.h"
#include "storage/agent_inventory.h"
#include "storage/rollup.h"

namespace metrics::storage {

enum class TrialState { kActive, kCompleted, kCanceled, kError };

// Metric groups of the profiling partition. Only "system" series have
// rollups and are read by queries; "timing" and "misc" hold the legacy
// profiler's other metric types (raw rows and registry only).
inline constexpr absl::string_view kSystemGroup = "system";
inline constexpr absl::string_view kTimingGroup = "timing";
inline constexpr absl::string_view kMiscGroup = "misc";

absl::string_view TrialStateName(TrialState state);  // "ACTIVE", ...
// The state a TrialStateName names; nullopt for any other text.
std::optional<TrialState> ParseTrialState(absl::string_view name);
// The one rule for taking metrics: FAILED_PRECONDITION when `state` is
// terminal ("<field>: trial 7 is COMPLETED and takes no more metrics"; no
// prefix for an empty `field`), OK while the trial is active.
absl::Status CheckTrialTakesMetrics(absl::string_view field, int32_t trial_id,
                                    TrialState state);
bool IsTerminal(TrialState state);
// The FAILED_PRECONDITION of a report of run `run_id` when the trial has
// reported the newer run `newest_run` (a restarted trial's late reports),
// naming the request's field as the platform's harness sends it.
absl::Status OlderRunError(int32_t trial_id, int32_t run_id, int32_t newest_run);

struct Trial {
  int32_t id = 0;
  TrialState state = TrialState::kActive;
  int64_t created_at_us = 0;
  int64_t updated_at_us = 0;
  std::optional<int64_t> ended_at_us;  // set once terminal
  // The newest run (the platform's trial_run_id) the trial reported
  // through the platform's trial-metrics API; unset when none.
  std::optional<int32_t> run_id;
};

// Where an ingest stream resumes (GetStreamStart).
struct StreamStart {
  Trial trial;
  int64_t position = 0;
};

inline constexpr int kMaxTrialListLimit = 1000;

// Which trials ListTrials returns: newest (highest id) first.
struct TrialListFilter {
  std::optional<TrialState> state;  // any state when unset
  std::optional<int32_t> before_id;  // only ids below it: the next page
  int limit = 100;
};

// A series a batch has values for (see proto/metrics/v1/ingest.proto).
struct SeriesDeclaration {
  std::string name;
  std::string gpu_uuid;  // empty for agent-wide series
  std::string unit;
};

// One instant on one agent. `series` and `values` are parallel: values[i]
// belongs to the batch's series[series[i]].
struct Report {
  int64_t time_us = 0;
  std::vector<uint32_t> series;
  std::vector<double> values;
  // The training batch index (legacy readings carry one), stored in the
  // row's total_batches column.
  std::optional<int32_t> batch;
};

class DeclaredSeries;  // storage/declared_series.h

// One agent's reports in one metric group: "system" from the ingest API,
// any group from the legacy shims.
struct MetricBatch {
  std::string stream_id;  // empty: no idempotency (sequence ignored)
  int64_t sequence = 0;
  int32_t trial_id = 0;
  std::string agent_id;
  // The series the reports' indexes name: `series` when it is not empty,
  // else `declared`'s. An ingest stream's batches share the declarations
  // they repeat (DeclaredSeries); other batches carry their own.
  std::vector<SeriesDeclaration> series;
  std::shared_ptr<const DeclaredSeries> declared;
  std::vector<Report> reports;
  // kSystemGroup, kTimingGroup or kMiscGroup.
  std::string metric_group = std::string(kSystemGroup);
  // The move of legacy data: accepted for terminal trials too.
  bool backfill = false;
  // The agent's hardware (system group only), stored with the batch: it
  // replaces what the trial kept for the agent. Held apart: few batches
  // carry one, and the batches waiting in a queue are many.
  std::shared_ptr<const AgentInventory> inventory;
  // The platform's run of the trial that reported it: refused
  // (FAILED_PRECONDITION) when the trial has reported a newer run.
  std::optional<int32_t> run_id;
  // The sequence is a report's time (microseconds), not a count: the
  // stream's position is the newest time stored, a batch at or before it
  // is a copy (kDuplicate), and times may leave gaps. A refused batch does
  // not move the position, so a copy of it is refused again.
  bool sequence_is_time = false;

  size_t ValueCount() const;
  size_t SeriesCount() const;
};

// What became of a submitted batch.
struct BatchOutcome {
  enum class Kind {
    kStored,     // committed
    kDuplicate,  // the store already had this (stream, sequence); skipped
    kRejected,   // refused for good (status says why); its sequence is used up
    kFailed,     // not stored, not used up (status says why); resend it
  };
  Kind kind = Kind::kFailed;
  absl::Status status;  // OK for kStored and kDuplicate
  int64_t sequence = 0;
};

// A series of a trial, from the registry; its extent and count come from
// the coarsest rollups.
struct SeriesInfo {
  int64_t series_id = 0;
  std::string metric_group = std::string(kSystemGroup);
  std::string agent_id;
  std::string gpu_uuid;  // empty for agent-wide series
  // ListSeries only: the GPU's place among its agent's GPUs, in the order
  // the agent first reported them (NVML's, as nvidia-smi numbers them).
  int gpu_index = 0;
  std::string name;
  std::string unit;
  int64_t sample_count = 0;               // 0 when nothing is stored
  std::optional<int64_t> first_time_us;  // set when sample_count > 0
  std::optional<int64_t> last_time_us;
};

// The partition of `metrics` the platform keeps a metric group in:
// "TRAINING", "VALIDATION", "PROFILING" (the profiling groups gpu, cpu,
// memory, disk and network, and "system") or "GENERIC" (any other).
absl::string_view PartitionOfGroup(absl::string_view group);
// Whether `group` is one of the platform's profiling groups.
bool IsProfilingGroup(absl::string_view group);

// One report of a group other than the profiling ones, as the platform
// keeps it: a generic row of `metrics`.
struct GenericReport {
  int32_t trial_id = 0;
  int32_t run_id = 0;
  std::string group;  // not a profiling group
  std::optional<int32_t> steps_completed;  // total_batches
  std::optional<int64_t> time_us;  // the report's time; the database's now when unset
  // JSON texts: an object, and an array of objects (none when unset).
  std::string avg_metrics;
  std::optional<std::string> batch_metrics;
};

// What became of a GenericReport.
enum class GenericWrite {
  kStored,     // a new row
  kMerged,     // its values joined the row of its step (the platform's rule)
  kDuplicate,  // the row of its step holds it already; nothing changed
};

// A stored generic row (GetMetrics).
struct GenericRow {
  int32_t trial_id = 0;
  int64_t id = 0;
  int32_t run_id = 0;  // 0 for rows written without one
  std::string group;
  int64_t time_us = 0;
  int32_t total_batches = 0;
  bool archived = false;
  std::string metrics_json;  // the row's `metrics` document
};

// One stored rollup bucket of one agent: the stats of the series asked for.
struct RollupRow {
  std::string agent_id;
  int64_t bucket_start_us = 0;
  AgentRollup stats;
};

// Takes the rows of a rollup read as they arrive, so that a read of many
// stored buckets never holds them all at once. A read may start over (its
// connection was lost and the transaction runs again): Restart() is called
// before the first row of every attempt and must drop what was taken.
class RollupSink {
 public:
  virtual ~RollupSink() = default;
  virtual void Restart() = 0;
  virtual void Take(const RollupRow& row) = 0;
};

// One raw sample: microseconds since the epoch and its value.
struct Sample {
  int64_t time_us = 0;
  double value = 0;
};

// Takes the samples of a streamed raw read (an export) as they are read.
// Unlike RollupSink it is never restarted: what it took may already have
// left the process, so a read that fails after its first sample fails
// rather than start over. Take returning an error (the client left) ends
// the read with that error.
class RawSampleSink {
 public:
  virtual ~RawSampleSink() = default;
  // Sample of series[series] (the read's list).
  virtual absl::Status Take(size_t series, const Sample& sample) = 0;
};

// One raw reading of a series, with the row it came from.
struct Reading {
  int64_t time_us = 0;
  int64_t row_id = 0;  // metrics.id: orders readings at the same time
  int32_t index = 0;   // then the reading's place in its row (a sealed window)
  std::optional<int32_t> batch;
  double value = 0;
};

// Where a read of readings resumes: after this (time, row, place).
struct ReadingCursor {
  int64_t time_us = INT64_MIN;
  int64_t row_id = INT64_MIN;
  int32_t index = 0;
};

// A subscription to a trial's changes; dropping it unsubscribes (and once
// the destructor returns, its callback is not running and will not run).
class ChangeSubscription {
 public:
  virtual ~ChangeSubscription() = default;
};

// The ingest writer's statistics since the store was created, for /metrics.
struct IngestStatistics {
  int64_t stored_batches = 0;
  int64_t stored_values = 0;
  int64_t duplicate_batches = 0;  // already stored; skipped
  int64_t rejected_batches = 0;   // refused for their content
  int64_t failed_batches = 0;     // not committed (database down, shutdown)
  int64_t queued_values = 0;      // waiting for the writer now
  // Since when commits have been refused for now and retried (the database
  // down, its disk full, ...): unset while the writer commits. Cleared by
  // the next commit that succeeds.
  std::optional<absl::Time> stalled_since;
  bool stalled_on_full_disk = false;  // the last refusal was a full disk
  // From a batch's submission to the end of its transaction.
  common::HistogramSnapshot commit_seconds;
};

// Where reads went when a hot standby serves them (a store with a read
// replica; all zero otherwise).
struct ReadRoutingStatistics {
  bool standby = false;       // a standby is configured
  int64_t standby_reads = 0;  // reads sent to it
  // Reads the primary answered instead, by reason: the standby did not
  // answer, lagged too far, is not in recovery, or a read there failed in
  // a way the primary may not (lost connection, recovery conflict, a trial
  // not found: maybe not replayed yet) and was asked again of the primary.
  int64_t fallback_unreachable = 0;
  int64_t fallback_lagging = 0;
  int64_t fallback_not_standby = 0;
  int64_t fallback_retried = 0;
  std::optional<double> lag_seconds;  // the last check's; none if unknown
};

// What the last CheckDatabase saw of the server --database-url led to:
// exported on /metrics, so that an operator sees which server ingest writes
// to and whether its commits wait for a synchronous standby.
struct DatabaseServerState {
  bool reached = false;  // the last check reached a server
  bool primary = false;  // ...one that accepts writes (not in recovery)
  // Standbys a primary now counts as synchronous (pg_stat_replication's
  // sync_state `sync` or `quorum`), and the largest replay lag of its
  // standbys; none when not reached, not a primary, or when the role may not
  // see them (they need pg_monitor).
  std::optional<int64_t> sync_standbys;
  std::optional<double> standby_lag_seconds;
};

// The newest stored value of one system series of an active trial.
struct LatestValue {
  int32_t trial_id = 0;
  std::string agent_id;
  std::string gpu_uuid;
  std::string name;
  std::string unit;
  double value = 0;
  int64_t time_us = 0;  // when it was sampled
};

// When an agent of a trial last reported a system sample.
struct AgentActivity {
  int32_t trial_id = 0;
  std::string agent_id;
  int64_t last_sample_us = 0;
};

// MetricStore::LatestValuesOfActiveTrials' answer.
struct LatestValues {
  std::vector<LatestValue> values;  // live agents' series
  std::vector<AgentActivity> stale_agents;
  int64_t stale_series = 0;  // the series of `stale_agents`
};

// The reads a chart needs: trial lists, series, stored buckets and raw
// samples. A store may answer them from a standby (MetricStore::Reads) or
// from the primary alone (MetricStore::PrimaryReads).
//
// Thread-safety: implementations are thread-safe.
// The OUT_OF_RANGE of a raw read whose window starts before the raw data
// horizon (raw retention removed the samples before `horizon_us`), and the
// horizon such an error carries (nullopt for any other status).
absl::Status RawExpiredError(int64_t horizon_us);
std::optional<int64_t> RawHorizonOf(const absl::Status& status);

class ChartReads {
 public:
  virtual ~ChartReads() = default;

  // Trials matching `filter`, highest id first. INVALID_ARGUMENT for a
  // limit outside 1..1000.
  virtual absl::StatusOr<std::vector<Trial>> ListTrials(
      const TrialListFilter& filter, absl::Time deadline) = 0;

  // The trial's system series, ordered by agent, name and GPU. With
  // `extents`, also each series' first and last time and sample count, read
  // from the coarsest rollups (a few rows per agent and day; never raw
  // rows). NOT_FOUND for an unknown trial.
  virtual absl::StatusOr<std::vector<SeriesInfo>> ListSeries(
      int32_t trial_id, bool extents, absl::Time deadline) = 0;

  // Hands `sink` the stored rollup buckets of `width_s` of `agents` whose
  // start lies in [from_us, to_us), holding only the stats of `series_ids`,
  // ordered by agent and bucket start. The store holds a bounded number of
  // rows at a time, however many the window has.
  virtual absl::Status ReadRollups(int32_t trial_id,
                                   const std::vector<std::string>& agents,
                                   int width_s,
                                   const std::vector<int64_t>& series_ids,
                                   int64_t from_us, int64_t to_us,
                                   absl::Time deadline, RollupSink& sink) = 0;

  // The raw samples of each of `series` with time in [from_us, to_us), each
  // in time order (ties in ingest order); result[i] belongs to series[i].
  // RESOURCE_EXHAUSTED when an agent has more than `max_reports` reports in
  // the window: the memory of a read is bounded whatever the data's density
  // (the caller answers from rollups instead). OUT_OF_RANGE when the window
  // starts before the raw data horizon: raw-data retention removed what was
  // before it (the rollups are kept).
  virtual absl::StatusOr<std::vector<std::vector<Sample>>> ReadRawSamples(
      int32_t trial_id, const std::vector<SeriesInfo>& series, int64_t from_us,
      int64_t to_us, int64_t max_reports, absl::Time deadline) = 0;

  // Every raw sample of `series` (all of `trial_id`) with time in
  // [from_us, to_us), to `sink` in time order across agents (ties: agent
  // id, then ingest order; within a report, the list's order), from one
  // snapshot. Memory is bounded by a page of rows per agent, whatever the
  // window holds. OUT_OF_RANGE (nothing taken; RawHorizonOf gives the
  // horizon) when the window starts before the raw data horizon (raw
  // retention).
  virtual absl::Status StreamRawSamples(int32_t trial_id,
                                        const std::vector<SeriesInfo>& series,
                                        int64_t from_us, int64_t to_us,
                                        absl::Time deadline, RawSampleSink& sink) = 0;
};

class MetricStore {
 public:
  virtual ~MetricStore() = default;

  // --- Trials (TrialService; every caller checks a trial with GetTrial;
  // trial lists are among the chart reads).

  // Registers a trial as ACTIVE with the given id, or an assigned one.
  // ALREADY_EXISTS if the id is taken.
  virtual absl::StatusOr<Trial> CreateTrial(std::optional<int32_t> id,
                                            absl::Time deadline) = 0;

  // NOT_FOUND for an unknown trial.
  virtual absl::StatusOr<Trial> GetTrial(int32_t id, absl::Time deadline) = 0;

  // Moves an ACTIVE trial to `state`. Setting a terminal trial's own state
  // again is a no-op; any other change of a terminal trial is
  // FAILED_PRECONDITION. NOT_FOUND for an unknown trial.
  virtual absl::StatusOr<Trial> SetTrialState(int32_t id, TrialState state,
                                              absl::Time deadline) = 0;

  // --- Ingest (IngestService, the legacy post, the legacy move).

  // A stream's trial and the last sequence number done on the stream (0
  // for a new stream), read together: a stream opens with one query.
  // NOT_FOUND for an unknown trial.
  virtual absl::StatusOr<StreamStart> GetStreamStart(
      int32_t trial_id, absl::string_view stream_id, absl::Time deadline) = 0;

  // Queues a batch for the group-commit writer and returns at once; never
  // blocks. `done` runs exactly once, on a writer thread, after the batch's
  // transaction ends; it must not block. The batch is validated first (an
  // invalid one is rejected, naming the field). Returns RESOURCE_EXHAUSTED
  // without queueing (and without calling `done`) when the queue is full,
  // UNAVAILABLE after Shutdown.
  virtual absl::Status SubmitBatch(
      MetricBatch batch, absl::AnyInvocable<void(BatchOutcome) &&> done) = 0;

  // --- The platform's trial-metrics API (ReportTrialMetrics, GetMetrics).

  // Records that run `run_id` of the trial reports: the trial's newest run
  // becomes it when it is newer and the trial active. Returns the trial as
  // it is then.
  // NOT_FOUND for an unknown trial; FAILED_PRECONDITION naming both runs
  // when the trial has reported a newer run.
  virtual absl::StatusOr<Trial> BeginTrialRun(int32_t trial_id, int32_t run_id,
                                              absl::Time deadline) = 0;

  // Stores a generic report as the platform does, in one transaction: the
  // trial must be active and its newest run no newer than the report's
  // (which becomes its newest); rows of older runs that the report's step
  // has passed are archived (a restarted run resumed from an earlier
  // step); then the report joins the row of its step (same trial, group
  // and steps, not archived) when there is one: identical, it changes
  // nothing (kDuplicate); with new keys of avg_metrics, they are added
  // (kMerged). Without steps it is always a new row. NOT_FOUND for an
  // unknown trial; FAILED_PRECONDITION for a terminal trial, an older run,
  // or a step's row holding another value for one of its keys, or batch
  // metrics already (naming the key or step).
  virtual absl::StatusOr<GenericWrite> WriteGenericReport(
      const GenericReport& report, absl::Time deadline) = 0;

  // Up to `limit` rows of the trial's `group`, not archived, with
  // total_batches above `after_batches`, by run then total_batches (the
  // platform's GetMetrics). A profiling group has none. NOT_FOUND for an
  // unknown trial.
  virtual absl::StatusOr<std::vector<GenericRow>> ReadGenericReports(
      int32_t trial_id, absl::string_view group, int32_t after_batches,
      size_t limit, absl::Time deadline) = 0;

  // --- Reads of system series (the query engine, trial lists) and changes
  // (follow).

  // The chart reads. A store with a standby answers them from it while it
  // is current (PgMetricStore), so an answer may lag the newest commits by
  // up to the standby's allowed lag. Lives as long as the store.
  virtual ChartReads& Reads() = 0;

  // The chart reads as follow must read them: they see every commit
  // acknowledged so far, so a follow never goes back in time (from the
  // primary, where there is a standby). Lives as long as the store.
  virtual ChartReads& PrimaryReads() { return Reads(); }

  // Calls `on_change` soon after data of `trial_id` is committed (by one of
  // `agent_ids`; any agent when empty) or its state changes, by any metricsd
  // on the same database, and after anything may have been missed (a lost
  // listening connection). Runs on a notifier thread; must be quick and must
  // not subscribe or unsubscribe.
  virtual std::unique_ptr<ChangeSubscription> SubscribeToChanges(
      int32_t trial_id, std::vector<std::string> agent_ids,
      std::function<void()> on_change) = 0;

  // --- Legacy reads: every metric group, raw readings (the legacy shims).

  // Every series of the trial in every metric group, without extents,
  // ordered by group, agent, name and GPU. NOT_FOUND for an unknown trial.
  virtual absl::StatusOr<std::vector<SeriesInfo>> ListSeriesOfEveryGroup(
      int32_t trial_id, absl::Time deadline) = 0;

  // Up to `limit` raw readings of `series` (of its metric_group) after
  // `after`, in (time, row) order.
  virtual absl::StatusOr<std::vector<Reading>> ReadReadings(
      int32_t trial_id, const SeriesInfo& series, ReadingCursor after,
      size_t limit, absl::Time deadline) = 0;

  // --- Service statistics (/metrics).

  // Thread-safe and cheap (counters in memory).
  virtual IngestStatistics GetIngestStatistics() const = 0;
  virtual ReadRoutingStatistics GetReadRoutingStatistics() const {
    return {};
  }

  // The newest value of each system series of every ACTIVE trial that has
  // one in its agent's newest finest rollup bucket (the series that
  // reported in the agent's last 10 s of data), newest trials first, at
  // most `limit`, from agents whose newest sample is at or after
  // `live_since_us`. Agents quiet since before it (a crashed job's, its
  // trial left ACTIVE) are passed over, so they do not use up the limit:
  // listed in `stale_agents` (at most `limit` of them).
  virtual absl::StatusOr<LatestValues> LatestValuesOfActiveTrials(
      size_t limit, int64_t live_since_us, absl::Time deadline) = 0;

  // Each agent's newest system sample time, for every agent of these
  // trials that has one, by trial then agent. Unknown trials have none.
  virtual absl::StatusOr<std::vector<AgentActivity>> AgentActivityOfTrials(
      const std::vector<int32_t>& trial_ids, absl::Time deadline) = 0;

  // The inventory each agent of the trial last sent, by agent id. Unknown
  // trials have none.
  virtual absl::StatusOr<std::vector<StoredInventory>> InventoriesOfTrial(
      int32_t trial_id, absl::Time deadline) = 0;

  // --- Health.

  // OK when the database answers as a primary; UNAVAILABLE (naming the
  // reason) when it cannot be reached, FAILED_PRECONDITION when the server
  // reached is a standby (nothing would commit there). Blocks as long as the
  // database takes: callers that must not wait call it from a thread of
  // their own. Uses a connection of its own, so a busy pool or writer does
  // not make it fail.
  virtual absl::Status CheckDatabase() = 0;

  // What the last CheckDatabase saw (nothing before the first).
  virtual DatabaseServerState GetDatabaseServerState() const { return {}; }

  // --- Lifetime.

  // Stops taking batches, commits what is queued (up to `deadline`, then
  // fails the rest), and closes connections. Idempotent.
  virtual void Shutdown(absl::Time deadline) = 0;
};

}  // namespace metrics::storage

#endif  // METRICS_STORAGE_METRIC_STORE_H_
