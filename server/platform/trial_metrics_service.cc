#include "server/platform/trial_metrics_service.h"

#include <google/protobuf/util/json_util.h>

#include <algorithm>
#include <limits>
#include <memory>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/grpc_status.h"
#include "common/retry_after.h"
#include "common/proto_time.h"
#include "server/services/unary_call.h"

namespace metrics::server {

namespace {

using determined::api::v1::Determined;
using determined::api::v1::GetMetricsRequest;
using determined::api::v1::GetMetricsResponse;
using determined::api::v1::ReportTrialMetricsRequest;
using determined::api::v1::ReportTrialMetricsResponse;
using Outcome = TrialMetricsStatistics::Outcome;
using Kind = TrialMetricsStatistics::Kind;

std::string PlatformMethod(absl::string_view name) {
  return FullMethodName(Determined::service_full_name(), name);
}

// What a failed store call counts as: the request's fault, or one a retry
// may mend.
Outcome FailureOutcome(const absl::Status& status) {
  switch (status.code()) {
    case absl::StatusCode::kUnavailable:
    case absl::StatusCode::kResourceExhausted:
    case absl::StatusCode::kAborted:
    case absl::StatusCode::kDeadlineExceeded:
    case absl::StatusCode::kUnknown:
    case absl::StatusCode::kInternal:
      return Outcome::kFailed;
    default:
      return Outcome::kRefused;
  }
}

}  // namespace

namespace platform_internal {

// One ReportTrialMetrics call: its batches' outcomes are gathered on the
// writer threads, and the last one in answers the call. Deletes itself.
class ReportCall {
 public:
  ReportCall(TrialMetricsService* service, UnaryCall& call,
             UnaryMethod::Done done)
      : service_(service), call_(call), done_(std::move(done)) {}

  const ReportTrialMetricsRequest& request() const {
    return static_cast<const ReportTrialMetricsRequest&>(*call_.request);
  }
  absl::Time deadline() const { return call_.deadline; }

  // Answers with `status` (counted as `outcome` of `kind`) and deletes
  // this. A failure a retry can mend carries the retry hint.
  void Finish(Kind kind, Outcome outcome, absl::Status status) {
    status = service_->Counted(kind, outcome, std::move(status));
    UnaryMethod::Done done = std::move(done_);
    delete this;
    done(std::move(status));
  }

  // `batches` outcomes are to come through Take.
  void Expect(int batches) {
    absl::MutexLock lock(&mu_);
    pending_ = batches;
  }

  void Take(const storage::BatchOutcome& outcome) {
    bool last;
    {
      absl::MutexLock lock(&mu_);
      switch (outcome.kind) {
        case storage::BatchOutcome::Kind::kStored:
          ++stored_;
          break;
        case storage::BatchOutcome::Kind::kDuplicate:
          break;
        case storage::BatchOutcome::Kind::kRejected:
          if (refusal_.ok()) refusal_ = outcome.status;
          break;
        case storage::BatchOutcome::Kind::kFailed:
          if (failure_.ok()) failure_ = outcome.status;
          break;
      }
      last = --pending_ == 0;
    }
    if (!last) return;
    absl::Status refusal, failure;
    int stored;
    {
      absl::MutexLock lock(&mu_);
      refusal = refusal_;
      failure = failure_;
      stored = stored_;
    }
    // A refusal is final; a failure is retried, and the batches stored
    // meanwhile are then copies.
    if (!refusal.ok()) {
      Finish(Kind::kProfiling, Outcome::kRefused, refusal);
    } else if (!failure.ok()) {
      Finish(Kind::kProfiling, Outcome::kFailed, failure);
    } else {
      Finish(Kind::kProfiling, stored > 0 ? Outcome::kStored : Outcome::kDuplicate,
             absl::OkStatus());
    }
  }

 private:
  TrialMetricsService* const service_;
  UnaryCall& call_;
  UnaryMethod::Done done_;
  absl::Mutex mu_;
  int pending_ ABSL_GUARDED_BY(mu_) = 0;
  int stored_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Status refusal_ ABSL_GUARDED_BY(mu_);
  absl::Status failure_ ABSL_GUARDED_BY(mu_);
};

// One GetMetrics stream: a page of rows read on the executor, written, and
// the next read once the write is done. Deletes itself in OnDone.
class GetMetricsReactor : public grpc::ServerWriteReactor<GetMetricsResponse> {
 public:
  GetMetricsReactor(TrialMetricsService* service, grpc::CallbackServerContext* context,
                    const GetMetricsRequest* request)
      : service_(service), context_(context), request_(request) {
    Post();
  }

  void OnWriteDone(bool ok) override {
    if (!ok) {
      Finish(grpc::Status(grpc::StatusCode::CANCELLED, "client went away"));
      return;
    }
    Post();
  }

  void OnDone() override { delete this; }

 private:
  void Post() {
    if (!service_->executor_->Post([this] { Step(); })) {
      Finish(common::ToGrpcStatus(
          absl::ResourceExhaustedError("the server is busy; retry later")));
    }
  }

  absl::Status Begin(absl::Time deadline) {
    if (absl::Status allowed = CheckCall(service_->guard_, *context_, PlatformMethod("GetMetrics"),
                                         *request_, deadline);
        !allowed.ok()) {
      return allowed;
    }
    if (request_->trial_ids().empty()) {
      return absl::InvalidArgumentError("trialIds: name at least one trial");
    }
    if (request_->group().empty()) {
      return absl::InvalidArgumentError("group: must not be empty");
    }
    trials_.assign(request_->trial_ids().begin(), request_->trial_ids().end());
    std::sort(trials_.begin(), trials_.end());
    for (size_t i = 0; i < trials_.size(); ++i) {
      if (trials_[i] <= 0) {
        return absl::InvalidArgumentError(
            absl::StrCat("trialIds: ", trials_[i], " is not a positive trial id"));
      }
      if (i > 0 && trials_[i] == trials_[i - 1]) {
        return absl::InvalidArgumentError(
            absl::StrCat("trialIds: trial ", trials_[i], " is named twice"));
      }
    }
    return absl::OkStatus();
  }

  // The next page's message, or the end of the stream.
  void Step() {
    const absl::Time deadline = CallDeadline(*context_);
    if (!begun_) {
      begun_ = true;
      if (absl::Status s = Begin(deadline); !s.ok()) {
        Finish(common::ToGrpcStatus(s));
        return;
      }
    }
    while (next_ < trials_.size()) {
      absl::StatusOr<std::vector<storage::GenericRow>> rows =
          service_->store_->ReadGenericReports(trials_[next_], request_->group(), after_,
                                               TrialMetricsService::kReportsPerMessage,
                                               deadline);
      if (!rows.ok()) {
        Finish(common::ToGrpcStatus(rows.status()));
        return;
      }
      // A short page is a trial's last, as the platform pages.
      if (rows->size() < TrialMetricsService::kReportsPerMessage) {
        ++next_;
        after_ = -1;
      } else {
        after_ = rows->back().total_batches;
      }
      if (rows->empty()) continue;
      response_.Clear();
      for (const storage::GenericRow& row : *rows) {
        auto* report = response_.add_metrics();
        report->set_trial_id(row.trial_id);
        // To the millisecond, as the platform answers.
        common::MicrosToProto(row.time_us - row.time_us % 1000, report->mutable_end_time());
        if (!google::protobuf::util::JsonStringToMessage(row.metrics_json,
                                                         report->mutable_metrics())
                 .ok()) {
          Finish(common::ToGrpcStatus(absl::DataLossError(
              absl::StrCat("the stored report ", row.id, " of trial ", row.trial_id,
                           " is no JSON object"))));
          return;
        }
        report->set_total_batches(row.total_batches);
        report->set_archived(row.archived);
        report->set_id(row.id <= std::numeric_limits<int32_t>::max()
                           ? static_cast<int32_t>(row.id)
                           : 0);
        report->set_trial_run_id(row.run_id);
        report->set_group(row.group);
      }
      StartWrite(&response_);
      return;
    }
    Finish(grpc::Status::OK);
  }

  TrialMetricsService* const service_;
  grpc::CallbackServerContext* const context_;
  const GetMetricsRequest* const request_;
  // Touched only by Step, one at a time (each after the last write).
  bool begun_ = false;
  std::vector<int32_t> trials_;
  size_t next_ = 0;
  int32_t after_ = -1;
  GetMetricsResponse response_;
};

}  // namespace platform_internal

TrialMetricsService::TrialMetricsService(storage::MetricStore* store,
                                         common::BlockingExecutor* executor,
                                         storage::IngestLimits limits,
                                         absl::Duration retry_after,
                                         const CallGuard* guard,
                                         TrialMetricsStatistics* statistics)
    : store_(store),
      executor_(executor),
      limits_(limits),
      retry_after_(retry_after),
      guard_(guard),
      statistics_(statistics) {
  report_.name = PlatformMethod("ReportTrialMetrics");
  report_.without_waiting = [this](UnaryCall& call, UnaryMethod::Done& done) {
    return ReportWithoutWaiting(call, done);
  };
  report_.answering = [this](UnaryCall& call, UnaryMethod::Done done) {
    Report(new platform_internal::ReportCall(this, call, std::move(done)));
  };
  // Counted as the work's own outcomes are.
  report_.on_refusal = [this](const UnaryCall& call, absl::Status refusal) {
    const auto& request = static_cast<const ReportTrialMetricsRequest&>(*call.request);
    const Outcome outcome = FailureOutcome(refusal);
    return Counted(
        storage::IsProfilingGroup(request.group()) ? Kind::kProfiling : Kind::kGeneric,
        outcome, std::move(refusal));
  };
  report_.guard = guard;
  report_.executor = executor;
}

absl::Status TrialMetricsService::Counted(Kind kind, Outcome outcome,
                                         absl::Status status) {
  statistics_->Count(kind, outcome);
  if (outcome == Outcome::kFailed) {
    status = common::WithRetryAfter(
        status, common::RetryAfterOf(status).value_or(retry_after_));
  }
  return status;
}

grpc::ServerUnaryReactor* TrialMetricsService::ReportTrialMetrics(
    grpc::CallbackServerContext* context, const ReportTrialMetricsRequest* request,
    ReportTrialMetricsResponse* response) {
  return ServeGrpcCall(report_, context, request, response);
}

bool TrialMetricsService::ReportWithoutWaiting(UnaryCall& call,
                                               UnaryMethod::Done& done) {
  const auto& request = static_cast<const ReportTrialMetricsRequest&>(*call.request);
  if (!storage::IsProfilingGroup(request.group())) return false;  // a store call
  const std::optional<absl::Status> run =
      KnownRun(request.metrics().trial_id(), request.metrics().trial_run_id());
  if (!run.has_value()) return false;  // the run's record waits
  auto* report = new platform_internal::ReportCall(this, call, std::move(done));
  absl::StatusOr<MappedTrialMetrics> mapped = MapTrialMetrics(request, limits_, absl::Now());
  if (!mapped.ok()) {
    report->Finish(Kind::kProfiling, Outcome::kRefused, mapped.status());
    return true;
  }
  if (!run->ok()) {
    report->Finish(Kind::kProfiling, FailureOutcome(*run), *run);
    return true;
  }
  Submit(report, *mapped);
  return true;
}

void TrialMetricsService::Report(platform_internal::ReportCall* call) {
  const ReportTrialMetricsRequest& request = call->request();
  const absl::Time deadline = call->deadline();
  const Kind kind =
      storage::IsProfilingGroup(request.group()) ? Kind::kProfiling : Kind::kGeneric;
  absl::StatusOr<MappedTrialMetrics> mapped =
      MapTrialMetrics(request, limits_, absl::Now());
  if (!mapped.ok()) {
    call->Finish(kind, Outcome::kRefused, mapped.status());
    return;
  }
  if (mapped->generic.has_value()) {
    absl::StatusOr<storage::GenericWrite> written =
        store_->WriteGenericReport(*mapped->generic, deadline);
    if (!written.ok()) {
      call->Finish(kind, FailureOutcome(written.status()), written.status());
      return;
    }
    call->Finish(kind,
                 *written == storage::GenericWrite::kDuplicate ? Outcome::kDuplicate
                                                               : Outcome::kStored,
                 absl::OkStatus());
    return;
  }
  if (absl::Status run = RecordRun(mapped->trial_id, mapped->run_id, deadline);
      !run.ok()) {
    call->Finish(kind, FailureOutcome(run), run);
    return;
  }
  Submit(call, *mapped);
}

void TrialMetricsService::Submit(platform_internal::ReportCall* call,
                                 MappedTrialMetrics& mapped) {
  ProfilingBatches& profiling = *mapped.profiling;
  for (const auto& [agent, values] : profiling.dropped) {
    statistics_->Dropped(mapped.trial_id, agent, mapped.group, values);
  }
  std::vector<storage::MetricBatch>& batches = profiling.batches;
  if (batches.empty()) {  // nothing but dropped values, or no agent
    call->Finish(Kind::kProfiling, Outcome::kStored, absl::OkStatus());
    return;
  }
  for (storage::MetricBatch& b : batches) {
    if (!TakeInventoryTurn(b.trial_id, b.agent_id)) continue;
    auto inventory = std::make_shared<storage::AgentInventory>();
    inventory->host_name = b.agent_id;
    inventory->agent_version = "the platform's harness (ReportTrialMetrics)";
    inventory->sampling = std::string(kHarnessSampling);
    // The harness sends its gpu group first, where it reads GPUs at all.
    if (mapped.group != "gpu") {
      inventory->gpu_status =
          "the platform's harness sent no GPU readings (no pynvml, or no GPU it can read)";
    }
    b.inventory = std::move(inventory);
  }
  call->Expect(static_cast<int>(batches.size()));
  for (size_t i = 0; i < batches.size(); ++i) {
    const std::pair<int32_t, std::string> agent{batches[i].trial_id, batches[i].agent_id};
    const bool inventoried = batches[i].inventory != nullptr;
    absl::Status queued = store_->SubmitBatch(
        std::move(batches[i]), [this, call, agent, inventoried](storage::BatchOutcome o) {
          if (inventoried && o.kind != storage::BatchOutcome::Kind::kStored) {
            absl::MutexLock lock(&mu_);
            inventoried_.erase(agent);  // sent again with its next report
          }
          call->Take(o);
        });
    if (!queued.ok()) {
      for (size_t j = i; j < batches.size(); ++j) {
        storage::BatchOutcome failed;
        failed.kind = storage::BatchOutcome::Kind::kFailed;
        failed.status = queued;
        call->Take(failed);
      }
      return;
    }
  }
}

std::optional<absl::Status> TrialMetricsService::KnownRun(int32_t trial_id,
                                                         int32_t run_id) {
  absl::MutexLock lock(&mu_);
  auto it = newest_runs_.find(trial_id);
  if (it == newest_runs_.end() || it->second < run_id) return std::nullopt;
  if (it->second == run_id) return absl::OkStatus();
  // Runs only grow: the store would refuse it too.
  return storage::OlderRunError(trial_id, run_id, it->second);
}

absl::Status TrialMetricsService::RecordRun(int32_t trial_id, int32_t run_id,
                                            absl::Time deadline) {
  if (std::optional<absl::Status> known = KnownRun(trial_id, run_id)) return *known;
  absl::StatusOr<storage::Trial> trial = store_->BeginTrialRun(trial_id, run_id, deadline);
  if (!trial.ok()) return trial.status();
  absl::MutexLock lock(&mu_);
  if (newest_runs_.size() >= kMaxRemembered) newest_runs_.clear();
  int32_t& newest = newest_runs_[trial_id];
  newest = std::max({newest, run_id, trial->run_id.value_or(run_id)});
  return absl::OkStatus();
}

bool TrialMetricsService::TakeInventoryTurn(int32_t trial_id, const std::string& agent) {
  absl::MutexLock lock(&mu_);
  if (inventoried_.size() >= kMaxRemembered) inventoried_.clear();
  return inventoried_.emplace(trial_id, agent).second;
}

grpc::ServerWriteReactor<GetMetricsResponse>* TrialMetricsService::GetMetrics(
    grpc::CallbackServerContext* context, const GetMetricsRequest* request) {
  return new platform_internal::GetMetricsReactor(this, context, request);
}

}  // namespace metrics::server
