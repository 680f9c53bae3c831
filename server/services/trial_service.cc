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

// RunOnExecutor for a `work` returning StatusOr<Trial>.
template <typename Work>
grpc::ServerUnaryReactor* RunTrialCall(grpc::CallbackServerContext* context,
                                       common::BlockingExecutor* executor,
                                       v1::Trial* response, Work work) {
  return RunOnExecutor(
      context, executor,
      [response, work = std::move(work)](absl::Time deadline) {
        absl::StatusOr<storage::Trial> trial = work(deadline);
        if (trial.ok()) TrialToProto(*trial, response);
        return trial.status();
      });
}

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

}  // namespace

grpc::ServerUnaryReactor* TrialService::CreateTrial(
    grpc::CallbackServerContext* context, const v1::CreateTrialRequest* request,
    v1::Trial* response) {
  const std::optional<int32_t> id =
      request->id() == 0 ? std::nullopt : std::optional<int32_t>(request->id());
  if (auto* refused =
          RefusedFromCache(context, guard_, TrialMethod("CreateTrial"), *request)) {
    return refused;
  }
  return RunTrialCall(context, executor_, response,
                      Guarded(guard_, context, TrialMethod("CreateTrial"), request,
                              [store = store_, id](absl::Time deadline) {
                                return store->CreateTrial(id, deadline);
                              }));
}

grpc::ServerUnaryReactor* TrialService::GetTrial(
    grpc::CallbackServerContext* context, const v1::GetTrialRequest* request,
    v1::Trial* response) {
  const int32_t id = request->trial_id();
  if (auto* refused =
          RefusedFromCache(context, guard_, TrialMethod("GetTrial"), *request)) {
    return refused;
  }
  return RunOnExecutor(
      context, executor_,
      Guarded(guard_, context, TrialMethod("GetTrial"), request,
              [store = store_, id, response, stale_after = stale_after_](
                  absl::Time deadline) -> absl::Status {
                absl::StatusOr<storage::Trial> trial =
                    store->GetTrial(id, deadline);
                if (!trial.ok()) return trial.status();
                TrialToProto(*trial, response);
                RETURN_IF_ERROR(AddAgentActivity(store, {response},
                                                 stale_after, deadline));
                return AddInventories(store, response, deadline);
              }));
}

grpc::ServerUnaryReactor* TrialService::ListTrials(
    grpc::CallbackServerContext* context, const v1::ListTrialsRequest* request,
    v1::ListTrialsResponse* response) {
  storage::TrialListFilter filter;
  absl::Status invalid;
  if (request->state() != v1::Trial::STATE_UNSPECIFIED) {
    filter.state = TrialStateFromProto(request->state());
    if (!filter.state.has_value()) {
      invalid = absl::InvalidArgumentError(
          "state: must be one of ACTIVE, COMPLETED, CANCELED, ERROR");
    }
  }
  if (request->limit() != 0) filter.limit = request->limit();
  if (request->before_id() < 0) {
    invalid = absl::InvalidArgumentError(absl::StrCat(
        "before_id: ", request->before_id(), " is negative"));
  } else if (request->before_id() > 0) {
    filter.before_id = request->before_id();
  }
  // Checked after the caller: a stranger learns nothing of the request.
  if (auto* refused =
          RefusedFromCache(context, guard_, TrialMethod("ListTrials"), *request)) {
    return refused;
  }
  return RunOnExecutor(
      context, executor_,
      Guarded(guard_, context, TrialMethod("ListTrials"), request,
              [store = store_, filter, invalid, response,
               stale_after = stale_after_](absl::Time deadline) -> absl::Status {
        if (!invalid.ok()) return invalid;
        absl::StatusOr<std::vector<storage::Trial>> trials =
            store->Reads().ListTrials(filter, deadline);
        if (!trials.ok()) return trials.status();
        std::vector<v1::Trial*> protos;
        for (const storage::Trial& trial : *trials) {
          protos.push_back(response->add_trials());
          TrialToProto(trial, protos.back());
        }
        return AddAgentActivity(store, protos, stale_after, deadline);
      }));
}

grpc::ServerUnaryReactor* TrialService::UpdateTrial(
    grpc::CallbackServerContext* context, const v1::UpdateTrialRequest* request,
    v1::Trial* response) {
  const std::optional<storage::TrialState> state =
      TrialStateFromProto(request->state());
  const int32_t id = request->trial_id();
  if (auto* refused =
          RefusedFromCache(context, guard_, TrialMethod("UpdateTrial"), *request)) {
    return refused;
  }
  return RunTrialCall(
      context, executor_, response,
      Guarded(guard_, context, TrialMethod("UpdateTrial"), request,
              [store = store_, id, state](
                  absl::Time deadline) -> absl::StatusOr<storage::Trial> {
                if (!state.has_value()) {
                  return absl::InvalidArgumentError(
                      "state: must be one of ACTIVE, COMPLETED, CANCELED, "
                      "ERROR");
                }
                return store->SetTrialState(id, *state, deadline);
              }));
}

}  // namespace metrics::server
