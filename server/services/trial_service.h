// metrics.v1.TrialService: register, read and end trials. Each call runs
// its store work on the blocking executor and finishes from there.
//
// Thread-safety: thread-safe; gRPC calls it from its callback threads.
#ifndef METRICS_SERVER_SERVICES_TRIAL_SERVICE_H_
#define METRICS_SERVER_SERVICES_TRIAL_SERVICE_H_

#include "absl/time/time.h"
#include "proto/metrics/v1/trials.grpc.pb.h"
#include "common/blocking_executor.h"
#include "server/auth/call_guard.h"
#include "storage/metric_store.h"

namespace metrics::server {

class TrialService final : public v1::TrialService::CallbackService {
 public:
  // `store`, `executor` and `guard` must outlive the service; a null
  // `guard` checks no caller (authentication off). An agent of an ACTIVE
  // trial is stale once it has sent nothing for longer than `stale_after`.
  TrialService(storage::MetricStore* store, common::BlockingExecutor* executor,
               const CallGuard* guard, absl::Duration stale_after)
      : store_(store),
        executor_(executor),
        guard_(guard),
        stale_after_(stale_after) {}

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
  storage::MetricStore* const store_;
  common::BlockingExecutor* const executor_;
  const CallGuard* const guard_;
  const absl::Duration stale_after_;
};

}  // namespace metrics::server

#endif  // METRICS_SERVER_SERVICES_TRIAL_SERVICE_H_
