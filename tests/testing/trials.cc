#include "tests/testing/trials.h"

#include <chrono>

#include "common/grpc_status.h"
#include "common/status_macros.h"
#include "proto/metrics/v1/trials.grpc.pb.h"

namespace metrics::test_util {

namespace {

constexpr auto kTimeout = std::chrono::seconds(30);

}  // namespace

absl::Status CreateTrial(const std::shared_ptr<grpc::Channel>& channel,
                         int32_t id) {
  auto stub = v1::TrialService::NewStub(channel);
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + kTimeout);
  v1::CreateTrialRequest request;
  request.set_id(id);
  v1::Trial trial;
  return common::FromGrpcStatus(stub->CreateTrial(&context, request, &trial));
}

absl::Status CompleteTrial(const std::shared_ptr<grpc::Channel>& channel,
                           int32_t id) {
  auto stub = v1::TrialService::NewStub(channel);
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + kTimeout);
  v1::UpdateTrialRequest request;
  request.set_trial_id(id);
  request.set_state(v1::Trial::COMPLETED);
  v1::Trial trial;
  return common::FromGrpcStatus(stub->UpdateTrial(&context, request, &trial));
}

absl::StatusOr<v1::Trial> GetTrial(const std::shared_ptr<grpc::Channel>& channel,
                                   int32_t id) {
  auto stub = v1::TrialService::NewStub(channel);
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + kTimeout);
  v1::GetTrialRequest request;
  request.set_trial_id(id);
  v1::Trial trial;
  RETURN_IF_ERROR(
      common::FromGrpcStatus(stub->GetTrial(&context, request, &trial)));
  return trial;
}

}  // namespace metrics::test_util
