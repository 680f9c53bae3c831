#include "server/services/unary_call.h"

namespace metrics::server {

absl::Time CallDeadline(const grpc::CallbackServerContext& context,
                        absl::Duration fallback) {
  const absl::Time deadline = absl::FromChrono(context.deadline());
  const absl::Time limit = absl::Now() + fallback;
  return deadline < limit ? deadline : limit;
}

}  // namespace metrics::server
