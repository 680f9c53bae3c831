// Registering and ending trials over TrialService, for tests and
// benchmarks that need a trial to send metrics to.
//
// Thread-safety: thread-safe (each call makes its own RPC).
#ifndef METRICS_TESTS_TESTING_TRIALS_H_
#define METRICS_TESTS_TESTING_TRIALS_H_

#include <grpcpp/channel.h>

#include <cstdint>
#include <memory>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "proto/metrics/v1/trials.pb.h"

namespace metrics::test_util {

// CreateTrial(id) with a 30 s deadline; the call's status.
absl::Status CreateTrial(const std::shared_ptr<grpc::Channel>& channel,
                         int32_t id);

// UpdateTrial(id, COMPLETED) with a 30 s deadline; the call's status.
absl::Status CompleteTrial(const std::shared_ptr<grpc::Channel>& channel,
                           int32_t id);

// GetTrial(id) with a 30 s deadline: the trial with its agents.
absl::StatusOr<v1::Trial> GetTrial(const std::shared_ptr<grpc::Channel>& channel,
                                   int32_t id);

}  // namespace metrics::test_util

#endif  // METRICS_TESTS_TESTING_TRIALS_H_
