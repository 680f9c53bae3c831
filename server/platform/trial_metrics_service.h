// The platform's current trial-metrics API, methods of service
// determined.api.v1.Determined (DeterminedService serves them with the
// legacy profiler methods):
// - ReportTrialMetrics: a report mapped by trial_metrics_mapping.h. A
//   profiling group's agents' batches go to the ingest writer, each its
//   agent's (group) stream's report at its time, so a copy is a duplicate;
//   the run is recorded first (an older run is refused). An agent's first
//   report here carries an inventory that says how the harness samples.
//   Any other group is one generic row (MetricStore::WriteGenericReport).
//   Answers {} once stored. When the queue is full or the database down the
//   call fails with a "retry-after-ms" hint (HTTP: Retry-After), which the
//   platform's harness waits out and retries, so a busy server does not fail
//   a trial.
// - GetMetrics: the trials' generic rows of a group, trial by trial, in
//   messages of up to kReportsPerMessage, as the platform pages them.
//
// ReportTrialMetrics is a UnaryMethod (server/services/unary_call.h), served
// for gRPC and REST alike: work that may wait for the database (a token not
// cached, a trial's run not known here, a generic row) runs on the
// executor; a profiling report of a known caller and run is mapped and
// queued on the door's thread, which never waits (the writer answers
// through its callback). GetMetrics' reads run on the executor. A GetMetrics stream holds no thread while its
// client reads.
//
// Thread-safety: thread-safe.
#ifndef METRICS_SERVER_PLATFORM_TRIAL_METRICS_SERVICE_H_
#define METRICS_SERVER_PLATFORM_TRIAL_METRICS_SERVICE_H_

#include <cstdint>
#include <optional>
#include <string>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/blocking_executor.h"
#include "proto/determined/api/v1/profiler.grpc.pb.h"
#include "server/auth/call_guard.h"
#include "server/platform/trial_metrics_mapping.h"
#include "server/platform/trial_metrics_statistics.h"
#include "server/services/unary_call.h"
#include "storage/batch_validation.h"
#include "storage/metric_store.h"

namespace metrics::server {

namespace platform_internal {
class ReportCall;
class GetMetricsReactor;
}  // namespace platform_internal

class TrialMetricsService final {
 public:
  static constexpr size_t kReportsPerMessage = 1000;
  // Trials whose newest run, and agents whose inventory, this process
  // remembers; past it they are forgotten (and asked or sent once more).
  static constexpr size_t kMaxRemembered = 100000;

  // `store`, `executor` and `statistics` must outlive the service; a null
  // `guard` checks no caller (authentication off). `retry_after` is the
  // hint a full queue or an unreachable database answers with.
  TrialMetricsService(storage::MetricStore* store,
                      common::BlockingExecutor* executor,
                      storage::IngestLimits limits, absl::Duration retry_after,
                      const CallGuard* guard,
                      TrialMetricsStatistics* statistics);

  // ReportTrialMetrics, for the REST gateway.
  const UnaryMethod* report_method() const { return &report_; }

  grpc::ServerUnaryReactor* ReportTrialMetrics(
      grpc::CallbackServerContext* context,
      const determined::api::v1::ReportTrialMetricsRequest* request,
      determined::api::v1::ReportTrialMetricsResponse* response);

  grpc::ServerWriteReactor<determined::api::v1::GetMetricsResponse>* GetMetrics(
      grpc::CallbackServerContext* context,
      const determined::api::v1::GetMetricsRequest* request);

 private:
  friend class platform_internal::ReportCall;
  friend class platform_internal::GetMetricsReactor;

  // The call's work when nothing of it waits (a profiling report of a run
  // this process knows; its caller known to the guard's cache), on the
  // door's thread: false when it must go to the executor.
  bool ReportWithoutWaiting(UnaryCall& call, UnaryMethod::Done& done)
      ABSL_LOCKS_EXCLUDED(mu_);
  // The call's work, on the executor, once its caller passed.
  void Report(platform_internal::ReportCall* call);
  // Counts `status` as `outcome` of `kind`; a failure a retry can mend
  // gets the retry hint (retry_after_ unless it names one).
  absl::Status Counted(TrialMetricsStatistics::Kind kind,
                       TrialMetricsStatistics::Outcome outcome,
                       absl::Status status);
  // Queues a profiling report's batches; the call ends with their outcomes.
  void Submit(platform_internal::ReportCall* call, MappedTrialMetrics& mapped)
      ABSL_LOCKS_EXCLUDED(mu_);
  // The run check from what this process knows: OK when the trial's newest
  // run is `run_id`, the older-run refusal when it is newer; nullopt when
  // the store must be asked.
  std::optional<absl::Status> KnownRun(int32_t trial_id, int32_t run_id)
      ABSL_LOCKS_EXCLUDED(mu_);
  // Records the report's run unless this process knows the trial has it.
  absl::Status RecordRun(int32_t trial_id, int32_t run_id, absl::Time deadline)
      ABSL_LOCKS_EXCLUDED(mu_);
  // Whether `agent` of the trial should send an inventory with this
  // report (its first here); marks it sent.
  bool TakeInventoryTurn(int32_t trial_id, const std::string& agent)
      ABSL_LOCKS_EXCLUDED(mu_);

  storage::MetricStore* const store_;
  common::BlockingExecutor* const executor_;
  const storage::IngestLimits limits_;
  const absl::Duration retry_after_;
  const CallGuard* const guard_;
  TrialMetricsStatistics* const statistics_;
  UnaryMethod report_;
  absl::Mutex mu_;
  absl::flat_hash_map<int32_t, int32_t> newest_runs_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_set<std::pair<int32_t, std::string>> inventoried_
      ABSL_GUARDED_BY(mu_);
};

}  // namespace metrics::server

#endif  // METRICS_SERVER_PLATFORM_TRIAL_METRICS_SERVICE_H_
