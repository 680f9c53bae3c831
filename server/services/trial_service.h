// metrics.v1.TrialService: register, read and end trials. Each call is a
// blocking UnaryMethod (unary_call.h), served for gRPC here and for REST by
// the gateway.
//
// Thread-safety: thread-safe; gRPC calls it from its callback threads.
#ifndef METRICS_SERVER_SERVICES_TRIAL_SERVICE_H_
#define METRICS_SERVER_SERVICES_TRIAL_SERVICE_H_

#include <vector>

#include "absl/time/time.h"
#include "proto/metrics/v1/trials.grpc.pb.h"
#include "common/blocking_executor.h"
#include "server/auth/call_guard.h"
#include "server/services/unary_call.h"
#include "storage/metric_store.h"

namespace metrics::server {

class TrialService final : public v1::TrialService::CallbackService {
 public:
  // `store`, `executor` and `guard` must outlive the service; a null
  // `guard` checks no caller (authentication off). An agent of an ACTIVE
  // trial is stale once it has sent nothing for longer than `stale_after`.
  TrialService(storage::MetricStore* store, common::BlockingExecutor* executor,
               const CallGuard* guard, absl::Duration stale_after);

  // The unary methods, for the REST gateway.
  std::vector<const UnaryMethod*> UnaryMethodsServed() const;

  grpc::ServerUnaryReactor* CreateTrial(grpc::CallbackServerContext* context,
                                        const v1::CreateTrialRequest* request,
                                        v1::Trial* response) override;
  grpc::ServerUnaryReactor* GetTrial(grpc::CallbackServerContext* context,
                                     const v1::GetTrialRequest* request,
                                     v1::Trial* response) override;
  grpc::ServerUnaryReactor* ListTrials(grpc::CallbackServerContext* context,
                                       const v1::ListTrialsRequest* request,
                                       v1::ListTrialsResponse* response) override;
  grpc::ServerUnaryReactor* UpdateTrial(grpc::CallbackServerContext* context,
                                        const v1::UpdateTrialRequest* request,
                                        v1::Trial* response) override;

 private:
  const UnaryMethod create_trial_;
  const UnaryMethod get_trial_;
  const UnaryMethod list_trials_;
  const UnaryMethod update_trial_;
};

}  // namespace metrics::server

#endif  // METRICS_SERVER_SERVICES_TRIAL_SERVICE_H_
