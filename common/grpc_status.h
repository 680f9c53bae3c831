// Conversion between absl::Status and grpc::Status at the RPC edges. The numeric
// codes are identical by design, so only the representation changes.
//
// Thread-safety: pure functions.
#ifndef METRICS_COMMON_GRPC_STATUS_H_
#define METRICS_COMMON_GRPC_STATUS_H_

#include <grpcpp/support/status.h>

#include "absl/status/status.h"

namespace metrics::common {

grpc::Status ToGrpcStatus(const absl::Status& status);
absl::Status FromGrpcStatus(const grpc::Status& status);

}  // namespace metrics::common

#endif  // METRICS_COMMON_GRPC_STATUS_H_
