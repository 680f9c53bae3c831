#include "server/trial_service.h"

#include <functional>
#include <optional>

#include "absl/time/clock.h"
#include "common/grpc_status.h"
#include "server/proto_convert.h"

namespace metrics::server {

namespace {

// Runs `work` (returning StatusOr<Trial>) on the executor and finishes the
// call with its result.
template <typename Work>
grpc::ServerUnaryReactor* RunTrialCall(grpc::CallbackServerContext* context,
                                       BlockingExecutor* executor,
                                       v1::Trial* response, Work work) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  const absl::Time deadline = CallDeadline(*context);
  const bool posted =
      executor->Post([reactor, response, deadline, work = std::move(work)]() {
        absl::StatusOr<storage::Trial> trial = work(deadline);
        if (trial.ok()) TrialToProto(*trial, response);
        reactor->Finish(common::ToGrpcStatus(trial.status()));
      });
  if (!posted) {
    reactor->Finish(common::ToGrpcStatus(
        absl::ResourceExhaustedError("the server is busy; retry later")));
  }
  return reactor;
}

}  // namespace

absl::Time CallDeadline(const grpc::CallbackServerContext& context,
                        absl::Duration fallback) {
  const absl::Time deadline = absl::FromChrono(context.deadline());
  const absl::Time limit = absl::Now() + fallback;
  return deadline < limit ? deadline : limit;
}

grpc::ServerUnaryReactor* TrialService::CreateTrial(
    grpc::CallbackServerContext* context, const v1::CreateTrialRequest* request,
    v1::Trial* response) {
  const std::optional<int32_t> id =
      request->id() == 0 ? std::nullopt : std::optional<int32_t>(request->id());
  return RunTrialCall(context, executor_, response,
                      [store = store_, id](absl::Time deadline) {
                        return store->CreateTrial(id, deadline);
                      });
}

grpc::ServerUnaryReactor* TrialService::GetTrial(
    grpc::CallbackServerContext* context, const v1::GetTrialRequest* request,
    v1::Trial* response) {
  const int32_t id = request->trial_id();
  return RunTrialCall(context, executor_, response,
                      [store = store_, id](absl::Time deadline) {
                        return store->GetTrial(id, deadline);
                      });
}

grpc::ServerUnaryReactor* TrialService::UpdateTrial(
    grpc::CallbackServerContext* context, const v1::UpdateTrialRequest* request,
    v1::Trial* response) {
  const std::optional<storage::TrialState> state =
      TrialStateFromProto(request->state());
  if (!state.has_value()) {
    grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
    reactor->Finish(common::ToGrpcStatus(absl::InvalidArgumentError(
        "state: must be one of ACTIVE, COMPLETED, CANCELED, ERROR")));
    return reactor;
  }
  const int32_t id = request->trial_id();
  return RunTrialCall(context, executor_, response,
                      [store = store_, id, state](absl::Time deadline) {
                        return store->SetTrialState(id, *state, deadline);
                      });
}

}  // namespace metrics::server
