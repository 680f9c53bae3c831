#include "server/services/trial_service.h"

#include <algorithm>
#include <functional>
#include <optional>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/grpc_status.h"
#include "common/proto_time.h"
#include "common/status_macros.h"
#include "server/services/proto_convert.h"
#include "server/services/unary_call.h"

namespace metrics::server {

namespace {

// Adds to `trial`'s agents the inventory each sent, and an agent of its own
// for one that sent an inventory and no sample yet.
absl::Status AddInventories(storage::MetricStore* store, v1::Trial* trial,
                            absl::Time deadline) {
  absl::StatusOr<std::vector<storage::StoredInventory>> inventories =
      store->InventoriesOfTrial(trial->id(), deadline);
  if (!inventories.ok()) return inventories.status();
  if (inventories->empty()) return absl::OkStatus();
  absl::flat_hash_map<std::string, v1::AgentActivity*> agents;
  for (v1::AgentActivity& agent : *trial->mutable_agents()) {
    agents[agent.agent_id()] = &agent;
  }
  for (const storage::StoredInventory& stored : *inventories) {
    v1::AgentActivity*& agent = agents[stored.agent_id];
    if (agent == nullptr) {
      agent = trial->add_agents();
      agent->set_agent_id(stored.agent_id);
    }
    InventoryToProto(stored, agent->mutable_inventory());
  }
  // Agents stay in agent id order, as without inventories.
  std::sort(trial->mutable_agents()->begin(), trial->mutable_agents()->end(),
            [](const v1::AgentActivity& a, const v1::AgentActivity& b) {
              return a.agent_id() < b.agent_id();
            });
  return absl::OkStatus();
}

// Adds to each of `trials` its agents and when they last reported.
absl::Status AddAgentActivity(storage::MetricStore* store,
                              const std::vector<v1::Trial*>& trials,
                              absl::Duration stale_after, absl::Time deadline) {
  absl::flat_hash_map<int32_t, v1::Trial*> by_id;
  std::vector<int32_t> ids;
  for (v1::Trial* trial : trials) {
    by_id[trial->id()] = trial;
    ids.push_back(trial->id());
  }
  absl::StatusOr<std::vector<storage::AgentActivity>> agents =
      store->AgentActivityOfTrials(ids, deadline);
  if (!agents.ok()) return agents.status();
  const int64_t stale_before_us = absl::ToUnixMicros(absl::Now() - stale_after);
  for (const storage::AgentActivity& agent : *agents) {
    auto it = by_id.find(agent.trial_id);
    if (it == by_id.end()) continue;
    v1::AgentActivity* proto = it->second->add_agents();
    proto->set_agent_id(agent.agent_id);
    common::MicrosToProto(agent.last_sample_us, proto->mutable_last_sample_at());
    proto->set_stale(it->second->state() == v1::Trial::ACTIVE &&
                     agent.last_sample_us < stale_before_us);
  }
  return absl::OkStatus();
}

std::string TrialMethod(absl::string_view name) {
  return FullMethodName(v1::TrialService::service_full_name(), name);
}

// A trial's store call, its answer the trial.
UnaryMethod::Blocking TrialAnswer(
    std::function<absl::StatusOr<storage::Trial>(UnaryCall& call)> work) {
  return [work = std::move(work)](UnaryCall& call) -> absl::Status {
    absl::StatusOr<storage::Trial> trial = work(call);
    if (trial.ok()) TrialToProto(*trial, static_cast<v1::Trial*>(call.response));
    return trial.status();
  };
}

UnaryMethod::Blocking CreateTrialWork(storage::MetricStore* store) {
  return TrialAnswer([store](UnaryCall& call) {
    const auto& request = static_cast<const v1::CreateTrialRequest&>(*call.request);
    const std::optional<int32_t> id =
        request.id() == 0 ? std::nullopt : std::optional<int32_t>(request.id());
    return store->CreateTrial(id, call.deadline);
  });
}

UnaryMethod::Blocking GetTrialWork(storage::MetricStore* store,
                                   absl::Duration stale_after) {
  return Typed<v1::GetTrialRequest, v1::Trial>(
      [store, stale_after](UnaryCall& call, const v1::GetTrialRequest& request,
                           v1::Trial* response) -> absl::Status {
        absl::StatusOr<storage::Trial> trial =
            store->GetTrial(request.trial_id(), call.deadline);
        if (!trial.ok()) return trial.status();
        TrialToProto(*trial, response);
        RETURN_IF_ERROR(
            AddAgentActivity(store, {response}, stale_after, call.deadline));
        return AddInventories(store, response, call.deadline);
      });
}

// The request is checked after the caller: a stranger learns nothing of it.
UnaryMethod::Blocking ListTrialsWork(storage::MetricStore* store,
                                     absl::Duration stale_after) {
  return Typed<v1::ListTrialsRequest, v1::ListTrialsResponse>(
      [store, stale_after](UnaryCall& call, const v1::ListTrialsRequest& request,
                           v1::ListTrialsResponse* response) -> absl::Status {
        storage::TrialListFilter filter;
        if (request.state() != v1::Trial::STATE_UNSPECIFIED) {
          filter.state = TrialStateFromProto(request.state());
          if (!filter.state.has_value()) {
            return absl::InvalidArgumentError(
                "state: must be one of ACTIVE, COMPLETED, CANCELED, ERROR");
          }
        }
        if (request.limit() != 0) filter.limit = request.limit();
        if (request.before_id() < 0) {
          return absl::InvalidArgumentError(absl::StrCat(
              "before_id: ", request.before_id(), " is negative"));
        }
        if (request.before_id() > 0) filter.before_id = request.before_id();
        absl::StatusOr<std::vector<storage::Trial>> trials =
            store->Reads().ListTrials(filter, call.deadline);
        if (!trials.ok()) return trials.status();
        std::vector<v1::Trial*> protos;
        for (const storage::Trial& trial : *trials) {
          protos.push_back(response->add_trials());
          TrialToProto(trial, protos.back());
        }
        return AddAgentActivity(store, protos, stale_after, call.deadline);
      });
}

UnaryMethod::Blocking UpdateTrialWork(storage::MetricStore* store) {
  return TrialAnswer(
      [store](UnaryCall& call) -> absl::StatusOr<storage::Trial> {
        const auto& request =
            static_cast<const v1::UpdateTrialRequest&>(*call.request);
        const std::optional<storage::TrialState> state =
            TrialStateFromProto(request.state());
        if (!state.has_value()) {
          return absl::InvalidArgumentError(
              "state: must be one of ACTIVE, COMPLETED, CANCELED, ERROR");
        }
        return store->SetTrialState(request.trial_id(), *state, call.deadline);
      });
}

}  // namespace

TrialService::TrialService(storage::MetricStore* store,
                           common::BlockingExecutor* executor,
                           const CallGuard* guard, absl::Duration stale_after)
    : create_trial_(BlockingMethod(TrialMethod("CreateTrial"),
                                   CreateTrialWork(store), guard, executor)),
      get_trial_(BlockingMethod(TrialMethod("GetTrial"),
                                GetTrialWork(store, stale_after), guard,
                                executor)),
      list_trials_(BlockingMethod(TrialMethod("ListTrials"),
                                  ListTrialsWork(store, stale_after), guard,
                                  executor)),
      update_trial_(BlockingMethod(TrialMethod("UpdateTrial"),
                                   UpdateTrialWork(store), guard, executor)) {}

std::vector<const UnaryMethod*> TrialService::UnaryMethodsServed() const {
  return {&create_trial_, &get_trial_, &list_trials_, &update_trial_};
}

grpc::ServerUnaryReactor* TrialService::CreateTrial(
    grpc::CallbackServerContext* context, const v1::CreateTrialRequest* request,
    v1::Trial* response) {
  return ServeGrpcCall(create_trial_, context, request, response);
}

grpc::ServerUnaryReactor* TrialService::GetTrial(
    grpc::CallbackServerContext* context, const v1::GetTrialRequest* request,
    v1::Trial* response) {
  return ServeGrpcCall(get_trial_, context, request, response);
}

grpc::ServerUnaryReactor* TrialService::ListTrials(
    grpc::CallbackServerContext* context, const v1::ListTrialsRequest* request,
    v1::ListTrialsResponse* response) {
  return ServeGrpcCall(list_trials_, context, request, response);
}

grpc::ServerUnaryReactor* TrialService::UpdateTrial(
    grpc::CallbackServerContext* context, const v1::UpdateTrialRequest* request,
    v1::Trial* response) {
  return ServeGrpcCall(update_trial_, context, request, response);
}

}  // namespace metrics::server
