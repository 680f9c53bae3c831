// determined.api.v1.Determined: the old profiler API as deprecated shims
// over the new storage (no storage of its own). Names and units follow
// storage/legacy_profiler.h both ways, except that the reads of a trial
// reported through the platform's current API (ReportTrialMetrics) show its
// series as that platform's own legacy reads do: with the names and units
// its harness sent, a series with a mount path left out of the list.
//
// - PostTrialProfilerMetricsBatch: the request is converted whole first
//   (legacy_batch_conversion.h; nothing is stored from a request with a bad
//   batch), then stored as the new ingest's batches. A unary method of the
//   shared path (server/services/unary_call.h), so REST calls it in this
//   process as it calls the current API.
// - GetTrialProfilerMetrics: one message per series (and per page of
//   kReadingsPerMessage readings) of everything stored; with follow, then
//   the new readings as they are committed, until the trial is terminal.
// - GetTrialProfilerAvailableSeries: the trial's series labels; with
//   follow, again whenever they change, until the trial is terminal.
//
// Every call is counted and logged through LegacyStatistics, and answers with
// the initial metadata "deprecation" (an RFC 9745 date) and "link" (the
// successor), which the REST gateway turns into HTTP headers.
//
// The streaming legacy calls are on the synchronous gRPC API: each holds one
// of gRPC's sync threads while it follows, which is simple and fine for a
// deprecated API with few callers; the new API's calls never block a
// thread.
// DeterminedService (server/determined_service.h) serves these methods with
// the service's current ones (server/platform/).
//
// Thread-safety: thread-safe.
#ifndef METRICS_SERVER_LEGACY_LEGACY_PROFILER_SERVICE_H_
#define METRICS_SERVER_LEGACY_LEGACY_PROFILER_SERVICE_H_

#include <functional>
#include <vector>

#include "absl/time/time.h"
#include "proto/determined/api/v1/profiler.grpc.pb.h"
#include "common/blocking_executor.h"
#include "server/auth/call_guard.h"
#include "server/legacy/legacy_statistics.h"
#include "server/services/unary_call.h"
#include "storage/batch_validation.h"
#include "storage/metric_store.h"

namespace metrics::server {

// When the legacy API was deprecated (2026-11-22T00:00:00Z), for the
// Deprecation header: "@" and seconds since the epoch (RFC 9745).
inline constexpr absl::string_view kLegacyDeprecationDate = "@1795305600";

// The Link header naming the successor of a legacy call (RFC 8594).
std::string LegacySuccessorLink(absl::string_view successor_path);

class LegacyProfilerService final {
 public:
  static constexpr int kReadingsPerMessage = 5000;

  // `store` and `statistics` must outlive the service; `limits` are the store's
  // (a request is checked whole against them before anything is queued).
  // `poll` bounds how long a follower waits between checks of a cancelled
  // call. Posts run on `executor`.
  // A null `guard` checks no caller (authentication off).
  LegacyProfilerService(storage::MetricStore* store, LegacyStatistics* statistics,
                        storage::IngestLimits limits, const CallGuard* guard,
                        common::BlockingExecutor* executor,
                        absl::Duration poll = absl::Seconds(1));

  grpc::Status GetTrialProfilerMetrics(
      grpc::ServerContext* context,
      const determined::api::v1::GetTrialProfilerMetricsRequest* request,
      grpc::ServerWriter<determined::api::v1::GetTrialProfilerMetricsResponse>*
          writer);
  grpc::Status GetTrialProfilerAvailableSeries(
      grpc::ServerContext* context,
      const determined::api::v1::GetTrialProfilerAvailableSeriesRequest*
          request,
      grpc::ServerWriter<
          determined::api::v1::GetTrialProfilerAvailableSeriesResponse>*
          writer);
  grpc::ServerUnaryReactor* PostTrialProfilerMetricsBatch(
      grpc::CallbackServerContext* context,
      const determined::api::v1::PostTrialProfilerMetricsBatchRequest* request,
      determined::api::v1::PostTrialProfilerMetricsBatchResponse* response);
  // PostTrialProfilerMetricsBatch as the REST gateway calls it.
  const UnaryMethod* post_method() const { return &post_; }

 private:
  // One pass over the trial's series (of every group); a non-OK status ends
  // the call with it.
  using Round = std::function<grpc::Status(
      const storage::Trial& trial,
      const std::vector<storage::SeriesInfo>& series, absl::Time deadline)>;

  // Runs `round` once, or with `follow` again after each change of the trial
  // until the trial is terminal.
  grpc::Status Rounds(grpc::ServerContext* context, int32_t trial_id,
                      bool follow, const Round& round);
  // Counts and logs the call, and marks the answer deprecated.
  void Deprecate(grpc::ServerContext* context, absl::string_view method,
                 const std::string& successor);
  // A post that passed the check.
  absl::Status Post(const determined::api::v1::PostTrialProfilerMetricsBatchRequest& request,
                    absl::Time deadline);

  storage::MetricStore* const store_;
  LegacyStatistics* const statistics_;
  const storage::IngestLimits limits_;
  const CallGuard* const guard_;
  const absl::Duration poll_;
  UnaryMethod post_;
};

}  // namespace metrics::server

#endif  // METRICS_SERVER_LEGACY_LEGACY_PROFILER_SERVICE_H_
