#include "server/legacy/legacy_profiler_service.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "common/grpc_status.h"
#include "common/proto_time.h"
#include "common/status_macros.h"
#include "server/legacy/legacy_batch_conversion.h"
#include "server/platform/trial_metrics_mapping.h"
#include "server/services/unary_call.h"
#include "storage/batch_group.h"
#include "storage/batch_validation.h"
#include "storage/legacy_profiler.h"

namespace metrics::server {

namespace {

using determined::api::v1::GetTrialProfilerAvailableSeriesRequest;
using determined::api::v1::GetTrialProfilerAvailableSeriesResponse;
using determined::api::v1::GetTrialProfilerMetricsRequest;
using determined::api::v1::GetTrialProfilerMetricsResponse;
using determined::api::v1::PostTrialProfilerMetricsBatchRequest;
using determined::api::v1::PostTrialProfilerMetricsBatchResponse;
using determined::trial::v1::TrialProfilerMetricLabels;
using determined::trial::v1::TrialProfilerMetricsBatch;

// Wakes a follower when its trial changes.
class ChangeSignal {
 public:
  void Notify() ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    changed_ = true;
  }
  // Waits until a change or `timeout`, and consumes the change.
  void Wait(absl::Duration timeout) ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    mu_.AwaitWithTimeout(absl::Condition(&changed_), timeout);
    changed_ = false;
  }

 private:
  absl::Mutex mu_;
  bool changed_ ABSL_GUARDED_BY(mu_) = false;
};

grpc::Status ClientLeft() {
  return grpc::Status(grpc::StatusCode::CANCELLED, "client went away");
}

absl::Time StoreDeadline(const grpc::ServerContext& context) {
  return std::min(absl::FromChrono(context.deadline()),
                  absl::Now() + kStoreCallTimeout);
}

// A stored series as the legacy reads show it. A trial that reported
// through the platform's current API (its harness since 0.30: a run id is
// known) is read as that platform's own legacy reads serve it, with the
// names and units the harness sent (memory_free in bytes, throughput in
// bytes/s), for its Web UI; any other trial as the releases before served
// it (storage/legacy_profiler.h).
storage::StoredName LegacyName(const storage::Trial& trial,
                               const storage::SeriesInfo& series) {
  if (trial.run_id.has_value()) return {series.name, series.unit, 1};
  return storage::ToLegacy(series.metric_group, series.name);
}

// The platform leaves a series with a mount path out of the list: its Web
// UI has no place for the label.
bool ListedForLegacyReads(const storage::Trial& trial,
                          const storage::SeriesInfo& series) {
  return !trial.run_id.has_value() || !IsMountSeries(series.name);
}

// The labels of a stored series as the old API names it.
void LegacyLabels(const storage::Trial& trial, const storage::SeriesInfo& series,
                  TrialProfilerMetricLabels* labels) {
  labels->set_trial_id(trial.id);
  labels->set_name(LegacyName(trial, series).name);
  labels->set_agent_id(series.agent_id);
  labels->set_gpu_uuid(series.gpu_uuid);
  TrialProfilerMetricLabels::ProfilerMetricType type =
      TrialProfilerMetricLabels::PROFILER_METRIC_TYPE_UNSPECIFIED;
  TrialProfilerMetricLabels::ProfilerMetricType_Parse(
      storage::LegacyTypeOfGroup(series.metric_group), &type);
  labels->set_metric_type(type);
}

// Empty filter labels match any value.
bool Matches(const TrialProfilerMetricLabels& filter, const storage::Trial& trial,
             const storage::SeriesInfo& series) {
  if (filter.metric_type() !=
          TrialProfilerMetricLabels::PROFILER_METRIC_TYPE_UNSPECIFIED &&
      GroupOfLegacyMetricType(filter.metric_type()) != series.metric_group) {
    return false;
  }
  if (!filter.name().empty() && LegacyName(trial, series).name != filter.name()) {
    return false;
  }
  if (!filter.agent_id().empty() && filter.agent_id() != series.agent_id) {
    return false;
  }
  return filter.gpu_uuid().empty() || filter.gpu_uuid() == series.gpu_uuid;
}

std::string LegacyMethod(absl::string_view name) {
  return FullMethodName(determined::api::v1::Determined::service_full_name(),
                        name);
}

// What marks a legacy call's answer deprecated, `successor` its successor.
std::vector<std::pair<std::string, std::string>> DeprecationMetadata(
    const std::string& successor) {
  return {{"deprecation", std::string(kLegacyDeprecationDate)},
          {"link", LegacySuccessorLink(successor)}};
}

// The successor of a post, as its Link header names it.
std::string PostSuccessor(const PostTrialProfilerMetricsBatchRequest& request) {
  const int32_t first_trial =
      request.batches_size() > 0 ? request.batches(0).labels().trial_id() : 0;
  return absl::StrCat("/api/v1/trials/", first_trial, "/metrics/system");
}

}  // namespace

LegacyProfilerService::LegacyProfilerService(storage::MetricStore* store,
                                             LegacyStatistics* statistics,
                                             storage::IngestLimits limits,
                                             const CallGuard* guard,
                                             common::BlockingExecutor* executor,
                                             absl::Duration poll)
    : store_(store),
      statistics_(statistics),
      limits_(limits),
      guard_(guard),
      poll_(poll),
      post_(BlockingMethod(
          LegacyMethod("PostTrialProfilerMetricsBatch"),
          Typed<PostTrialProfilerMetricsBatchRequest, PostTrialProfilerMetricsBatchResponse>(
              [this](UnaryCall& call, const PostTrialProfilerMetricsBatchRequest& request,
                     PostTrialProfilerMetricsBatchResponse*) {
                return Post(request, call.deadline);
              }),
          guard, executor)) {
  // Refused calls are counted and marked deprecated too.
  post_.on_start = [this](UnaryCall& call) {
    const std::string successor =
        PostSuccessor(static_cast<const PostTrialProfilerMetricsBatchRequest&>(*call.request));
    statistics_->Record("PostTrialProfilerMetricsBatch", call.peer, successor);
    for (auto& entry : DeprecationMetadata(successor)) {
      call.initial_metadata.push_back(std::move(entry));
    }
  };
}

grpc::Status LegacyProfilerService::Rounds(
    grpc::ServerContext* context, int32_t trial_id, bool follow,
    const Round& round) {
  ChangeSignal signal;
  std::unique_ptr<storage::ChangeSubscription> subscription;
  // A follow ends when its token stops authenticating (revoked, expired).
  absl::Mutex refusal_mu;
  absl::Status refusal;
  std::unique_ptr<CredentialWatch::Watched> watched;
  if (follow) {
    subscription = store_->SubscribeToChanges(
        trial_id, {}, [&signal] { signal.Notify(); });
    if (guard_ != nullptr) {
      watched = guard_->WatchStream(
          CallGuard::CredentialOf(*context), [&](absl::Status refused) {
            {
              absl::MutexLock lock(&refusal_mu);
              refusal = std::move(refused);
            }
            signal.Notify();
          });
    }
  }
  while (true) {
    if (context->IsCancelled()) {
      return grpc::Status(grpc::StatusCode::CANCELLED, "call cancelled");
    }
    {
      absl::MutexLock lock(&refusal_mu);
      if (!refusal.ok()) return common::ToGrpcStatus(refusal);
    }
    const absl::Time deadline = StoreDeadline(*context);
    // The state is read before the data: once terminal, no commit can follow
    // (commits hold the trial row FOR SHARE), so that round is the last.
    absl::StatusOr<storage::Trial> trial = store_->GetTrial(trial_id, deadline);
    if (!trial.ok()) return common::ToGrpcStatus(trial.status());
    const bool last = !follow || storage::IsTerminal(trial->state);
    absl::StatusOr<std::vector<storage::SeriesInfo>> series =
        store_->ListSeriesOfEveryGroup(trial_id, deadline);
    if (!series.ok()) return common::ToGrpcStatus(series.status());
    if (grpc::Status status = round(*trial, *series, deadline); !status.ok()) {
      return status;
    }
    if (last) return grpc::Status::OK;
    signal.Wait(poll_);
  }
}

std::string LegacySuccessorLink(absl::string_view successor_path) {
  return absl::StrCat("<", successor_path, ">; rel=\"successor-version\"");
}

void LegacyProfilerService::Deprecate(grpc::ServerContext* context,
                                      absl::string_view method,
                                      const std::string& successor) {
  // Calls through the REST gateway name their HTTP client.
  statistics_->Record(method, CallGuard::PeerOf(*context), successor);
  for (const auto& [key, value] : DeprecationMetadata(successor)) {
    context->AddInitialMetadata(key, value);
  }
}

grpc::Status LegacyProfilerService::GetTrialProfilerMetrics(
    grpc::ServerContext* context, const GetTrialProfilerMetricsRequest* request,
    grpc::ServerWriter<GetTrialProfilerMetricsResponse>* writer) {
  const TrialProfilerMetricLabels& filter = request->labels();
  const int32_t trial_id = filter.trial_id();
  Deprecate(context, "GetTrialProfilerMetrics",
            absl::StrCat("/api/v1/trials/", trial_id, "/metrics/system"));
  if (absl::Status allowed =
          CheckCall(guard_, *context, LegacyMethod("GetTrialProfilerMetrics"),
                    *request, StoreDeadline(*context));
      !allowed.ok()) {
    return common::ToGrpcStatus(allowed);
  }
  if (absl::Status s = CheckLegacyTrialId("labels.trial_id", trial_id); !s.ok()) {
    return common::ToGrpcStatus(s);
  }
  std::map<int64_t, storage::ReadingCursor> cursors;  // by series id
  return Rounds(
      context, trial_id, request->follow(),
      [&](const storage::Trial& trial,
          const std::vector<storage::SeriesInfo>& series,
          absl::Time deadline) -> grpc::Status {
        for (const storage::SeriesInfo& s : series) {
          if (!Matches(filter, trial, s)) continue;
          const double scale = LegacyName(trial, s).scale;
          storage::ReadingCursor& cursor = cursors[s.series_id];
          while (true) {
            absl::StatusOr<std::vector<storage::Reading>> readings =
                store_->ReadReadings(trial_id, s, cursor, kReadingsPerMessage,
                                     deadline);
            if (!readings.ok()) return common::ToGrpcStatus(readings.status());
            if (readings->empty()) break;
            GetTrialProfilerMetricsResponse response;
            TrialProfilerMetricsBatch* batch = response.mutable_batch();
            LegacyLabels(trial, s, batch->mutable_labels());
            for (const storage::Reading& r : *readings) {
              batch->add_values(static_cast<float>(r.value / scale));
              batch->add_batches(r.batch.value_or(0));
              common::MicrosToProto(r.time_us, batch->add_timestamps());
            }
            cursor = {readings->back().time_us, readings->back().row_id, readings->back().index};
            if (!writer->Write(response)) return ClientLeft();
            if (readings->size() < kReadingsPerMessage) break;
          }
        }
        return grpc::Status::OK;
      });
}

grpc::Status LegacyProfilerService::GetTrialProfilerAvailableSeries(
    grpc::ServerContext* context,
    const GetTrialProfilerAvailableSeriesRequest* request,
    grpc::ServerWriter<GetTrialProfilerAvailableSeriesResponse>* writer) {
  const int32_t trial_id = request->trial_id();
  Deprecate(context, "GetTrialProfilerAvailableSeries",
            absl::StrCat("/api/v1/trials/", trial_id, "/metrics/system/series"));
  if (absl::Status allowed = CheckCall(
          guard_, *context, LegacyMethod("GetTrialProfilerAvailableSeries"),
          *request, StoreDeadline(*context));
      !allowed.ok()) {
    return common::ToGrpcStatus(allowed);
  }
  if (absl::Status s = CheckLegacyTrialId("trial_id", trial_id); !s.ok()) {
    return common::ToGrpcStatus(s);
  }
  std::optional<std::string> sent;  // the last list sent, serialized
  return Rounds(
      context, trial_id, request->follow(),
      [&](const storage::Trial& trial,
          const std::vector<storage::SeriesInfo>& series,
          absl::Time) -> grpc::Status {
        GetTrialProfilerAvailableSeriesResponse response;
        for (const storage::SeriesInfo& s : series) {
          if (!ListedForLegacyReads(trial, s)) continue;
          LegacyLabels(trial, s, response.add_labels());
        }
        std::string serialized = response.SerializeAsString();
        if (sent == serialized) return grpc::Status::OK;
        if (!writer->Write(response)) return ClientLeft();
        sent = std::move(serialized);
        return grpc::Status::OK;
      });
}

grpc::ServerUnaryReactor* LegacyProfilerService::PostTrialProfilerMetricsBatch(
    grpc::CallbackServerContext* context,
    const PostTrialProfilerMetricsBatchRequest* request,
    PostTrialProfilerMetricsBatchResponse* response) {
  return ServeGrpcCall(post_, context, request, response);
}

absl::Status LegacyProfilerService::Post(const PostTrialProfilerMetricsBatchRequest& request,
                                         absl::Time deadline) {
  absl::StatusOr<std::vector<storage::MetricBatch>> batches =
      ConvertLegacyRequest(request, limits_);
  if (!batches.ok()) return batches.status();
  // Unknown or terminal trials refuse the whole request before anything is
  // queued.
  for (const storage::MetricBatch& b : *batches) {
    absl::StatusOr<storage::Trial> trial = store_->GetTrial(b.trial_id, deadline);
    if (!trial.ok()) return trial.status();
    if (absl::Status takes =
            storage::CheckTrialTakesMetrics("", b.trial_id, trial->state);
        !takes.ok()) {
      return takes;
    }
  }
  // The first failure is the call's; the store calls back on one thread at
  // a time, after Submit or before Wait returns.
  absl::Status first_error;
  storage::BatchGroup group(*store_, /*wait_for_room=*/false);
  for (storage::MetricBatch& b : *batches) {
    group.Submit(std::move(b), [&first_error](const storage::BatchOutcome& o) {
      if (first_error.ok() && !o.status.ok()) first_error = o.status;
    });
  }
  group.Wait();
  return first_error;
}

}  // namespace metrics::server
