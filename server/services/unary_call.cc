#include "server/services/unary_call.h"

#include <optional>

namespace metrics::server {

absl::Time CallDeadline(const grpc::CallbackServerContext& context,
                        absl::Duration fallback) {
  const absl::Time deadline = absl::FromChrono(context.deadline());
  const absl::Time limit = absl::Now() + fallback;
  return deadline < limit ? deadline : limit;
}

grpc::ServerUnaryReactor* RefusedFromCache(grpc::CallbackServerContext* context,
                                           const CallGuard* guard,
                                           absl::string_view method,
                                           const google::protobuf::Message& request) {
  if (guard == nullptr) return nullptr;
  std::optional<absl::Status> cached =
      guard->CheckCached(*context, method, request, /*first_message=*/true);
  if (!cached.has_value() || cached->ok()) return nullptr;
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  reactor->Finish(common::ToGrpcStatus(*cached));
  return reactor;
}

}  // namespace metrics::server
