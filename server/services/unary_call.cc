#include "server/services/unary_call.h"

#include <memory>
#include <optional>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/grpc_status.h"
#include "common/retry_after.h"

namespace metrics::server {

namespace {

absl::Status Refusal(const UnaryMethod& method, const UnaryCall& call,
                     absl::Status refusal) {
  if (!method.on_refusal) return refusal;
  return method.on_refusal(call, std::move(refusal));
}

}  // namespace

absl::Time CallDeadline(const grpc::CallbackServerContext& context,
                        absl::Duration fallback) {
  const absl::Time deadline = absl::FromChrono(context.deadline());
  const absl::Time limit = absl::Now() + fallback;
  return deadline < limit ? deadline : limit;
}

void ServeUnaryCall(const UnaryMethod& method, UnaryCall& call,
                    std::function<void(absl::Status)> done) {
  if (method.on_start) method.on_start(call);
  done = [latency = method.latency.get(), start = absl::Now(),
          done = std::move(done)](absl::Status status) {
    latency->Observe(absl::ToDoubleSeconds(absl::Now() - start));
    done(std::move(status));
  };
  // A caller the cache knows is refused, or answered without waiting, on
  // this thread: a flood of refused tokens takes no executor slot from good
  // callers, and a known reporter's batch no thread hand-off. Either way
  // the caller is checked once.
  bool checked = method.guard == nullptr;
  if (!checked) {
    std::optional<absl::Status> cached = method.guard->CheckCached(
        call.credential, call.peer, method.name, *call.request);
    if (cached.has_value() && !cached->ok()) {
      done(Refusal(method, call, *std::move(cached)));
      return;
    }
    checked = cached.has_value();
  }
  if (checked && method.without_waiting && method.without_waiting(call, done)) {
    return;
  }
  // Shared, so that a full queue's refusal can still call it.
  auto pending =
      std::make_shared<UnaryMethod::Done>(std::move(done));
  if (!method.executor->Post([&method, &call, checked, pending] {
        if (!checked) {
          if (absl::Status allowed = method.guard->Check(
                  call.credential, call.peer, method.name, *call.request,
                  call.deadline);
              !allowed.ok()) {
            (*pending)(Refusal(method, call, std::move(allowed)));
            return;
          }
        }
        if (method.answering) {
          method.answering(call, std::move(*pending));
        } else {
          (*pending)(method.blocking(call));
        }
      })) {
    (*pending)(Refusal(
        method, call,
        absl::ResourceExhaustedError("the server is busy; retry later")));
  }
}

grpc::ServerUnaryReactor* ServeGrpcCall(const UnaryMethod& method,
                                        grpc::CallbackServerContext* context,
                                        const google::protobuf::Message* request,
                                        google::protobuf::Message* response) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  auto* call = new UnaryCall{CallGuard::CredentialOf(*context),
                             CallGuard::PeerOf(*context),
                             CallDeadline(*context),
                             request,
                             response,
                             {}};
  ServeUnaryCall(method, *call,
                 [context, reactor, call](absl::Status status) {
                   for (auto& [key, value] : call->initial_metadata) {
                     context->AddInitialMetadata(key, value);
                   }
                   if (std::optional<absl::Duration> wait =
                           common::RetryAfterOf(status)) {
                     context->AddTrailingMetadata(
                         "retry-after-ms",
                         absl::StrCat(absl::ToInt64Milliseconds(*wait)));
                   }
                   delete call;
                   reactor->Finish(common::ToGrpcStatus(status));
                 });
  return reactor;
}

}  // namespace metrics::server
