// How a caller presents its API token: "authorization: Bearer <token>", as
// gRPC and HTTP clients send it, or "x-allocation-token: Bearer <token>",
// where the platform's harness sends a task's session token (gRPC metadata;
// HTTP clients send it as grpc-gateway's header "Grpc-Metadata-x-allocation-
// token"). Both are taken on every door; one credential comes of the two.
//
// Thread-safety: constants and a pure function.
#ifndef METRICS_COMMON_PRESENTED_CREDENTIAL_H_
#define METRICS_COMMON_PRESENTED_CREDENTIAL_H_

#include <string>

#include "absl/strings/string_view.h"

namespace metrics::common {

inline constexpr absl::string_view kAllocationTokenMetadata = "x-allocation-token";
inline constexpr absl::string_view kAllocationTokenHeader =
    "Grpc-Metadata-x-allocation-token";

// The credential presented: `authorization`, or `allocation_token` where
// only that is given. Both given and different: a value no token matches,
// so the call fails as with any bad token.
std::string PresentedCredential(absl::string_view authorization,
                                absl::string_view allocation_token);

}  // namespace metrics::common

#endif  // METRICS_COMMON_PRESENTED_CREDENTIAL_H_
