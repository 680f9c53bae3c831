// Unary gRPC calls whose work blocks on the store: the work runs on the
// common::BlockingExecutor, never on gRPC's callback threads (gRFC L67), under one
// deadline rule for every store call a server makes.
//
// Thread-safety: RunOnExecutor is called on a gRPC callback thread; `work`
// runs on an executor thread.
#ifndef METRICS_SERVER_SERVICES_UNARY_CALL_H_
#define METRICS_SERVER_SERVICES_UNARY_CALL_H_

#include <grpcpp/server_context.h>
#include <grpcpp/support/server_callback.h>

#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/grpc_status.h"
#include "common/histogram.h"
#include "common/blocking_executor.h"
#include "server/auth/call_guard.h"

namespace metrics::server {

// How long a store call may take when the client set no earlier deadline
// (and for work no client waits on, such as a follow's rounds).
inline constexpr absl::Duration kStoreCallTimeout = absl::Seconds(30);

// The call's deadline, or `fallback` from now when that is earlier.
absl::Time CallDeadline(const grpc::CallbackServerContext& context,
                        absl::Duration fallback = kStoreCallTimeout);

// Runs `work` (taking the deadline, filling the response and returning a
// Status) on `executor` and finishes the call with its status;
// RESOURCE_EXHAUSTED when the executor's queue is full. `latency`, if given,
// gets the time from the call's start to the end of the work.
template <typename Work>
grpc::ServerUnaryReactor* RunOnExecutor(grpc::CallbackServerContext* context,
                                        common::BlockingExecutor* executor, Work work,
                                        common::Histogram* latency = nullptr) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  const absl::Time deadline = CallDeadline(*context);
  const absl::Time start = absl::Now();
  if (!executor->Post([reactor, deadline, start, latency,
                       work = std::move(work)]() {
        const absl::Status status = work(deadline);
        if (latency != nullptr) {
          latency->Observe(absl::ToDoubleSeconds(absl::Now() - start));
        }
        reactor->Finish(common::ToGrpcStatus(status));
      })) {
    reactor->Finish(common::ToGrpcStatus(
        absl::ResourceExhaustedError("the server is busy; retry later")));
  }
  return reactor;
}

// A refusal the authenticator's caches already know (a bad or refused
// token, a limited address, a known token outside its rights), answered on
// gRPC's thread, so a flood of bad tokens takes no executor slot from good
// callers. Null: go on (Guarded checks again, from the cache). Null too
// when `guard` is null.
grpc::ServerUnaryReactor* RefusedFromCache(grpc::CallbackServerContext* context,
                                           const CallGuard* guard,
                                           absl::string_view method,
                                           const google::protobuf::Message& request);

// `work` (for RunOnExecutor) behind `guard`'s check of `request` for
// `method`: the caller is refused before any work when it may not make the
// call. No check when `guard` is null (authentication off). `context` and
// `request` must live until the work ran (a unary call's do).
template <typename Work>
auto Guarded(const CallGuard* guard, grpc::ServerContextBase* context,
             std::string method, const google::protobuf::Message* request,
             Work work) {
  return [guard, context, method = std::move(method), request,
          work = std::move(work)](absl::Time deadline)
             -> decltype(work(deadline)) {
    if (absl::Status allowed =
            CheckCall(guard, *context, method, *request, deadline);
        !allowed.ok()) {
      return allowed;
    }
    return work(deadline);
  };
}

}  // namespace metrics::server

#endif  // METRICS_SERVER_SERVICES_UNARY_CALL_H_
