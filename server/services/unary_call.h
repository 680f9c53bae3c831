// The one way a unary RPC is served, whichever door it came in by: gRPC's
// (a generated service's method calls ServeGrpcCall) or the REST gateway's
// (which calls ServeUnaryCall itself, with no second trip through gRPC).
// Both pass the same check (the call guard: from its cache on the door's
// thread, else against the token store on an executor thread), the same
// executor hand-off, deadline and latency histogram, and end in the same
// status; only how the answer leaves differs (docs/design.md, "Adding an
// RPC").
//
// Thread-safety: UnaryMethod is immutable once made, and may be served from
// any thread; a UnaryCall is used by one thread at a time (handed from the
// door's thread to an executor's and back).
#ifndef METRICS_SERVER_SERVICES_UNARY_CALL_H_
#define METRICS_SERVER_SERVICES_UNARY_CALL_H_

#include <google/protobuf/message.h>
#include <grpcpp/server_context.h>
#include <grpcpp/support/server_callback.h>

#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/time/time.h"
#include "common/blocking_executor.h"
#include "common/histogram.h"
#include "server/auth/call_guard.h"

namespace metrics::server {

// How long a store call may take when the client set no earlier deadline
// (and for work no client waits on, such as a follow's rounds).
inline constexpr absl::Duration kStoreCallTimeout = absl::Seconds(30);

// The call's deadline, or `fallback` from now when that is earlier.
absl::Time CallDeadline(const grpc::CallbackServerContext& context,
                        absl::Duration fallback = kStoreCallTimeout);

// One unary call, as its door received it.
struct UnaryCall {
  std::string credential;  // as CallGuard::CredentialOf gives it
  std::string peer;        // the caller's address, as CallGuard::PeerOf
  absl::Time deadline;     // the client's, at most kStoreCallTimeout away
  const google::protobuf::Message* request = nullptr;
  google::protobuf::Message* response = nullptr;
  // What the answer starts with, set by the work: gRPC's initial metadata;
  // over REST, "Grpc-Metadata-<key>" headers (and "deprecation" and "link"
  // as the standard headers too).
  std::vector<std::pair<std::string, std::string>> initial_metadata;
};

// What a unary method does once its caller passed the check.
struct UnaryMethod {
  using Done = std::function<void(absl::Status)>;
  // Work that may block (on the store): run on `executor`, fills
  // call.response by call.deadline.
  using Blocking = std::function<absl::Status(UnaryCall& call)>;
  // Work that answers through `done`, once, from any thread, now or later
  // (a batch handed to the writer answers when it is committed): run on
  // `executor`, so it may block before it hands its work on.
  using Answering = std::function<void(UnaryCall& call, Done done)>;
  // An answer without waiting, tried on the door's thread when the guard's
  // cache knows the caller: true when it answered (or will, through
  // `done`, which it then took); false, leaving `done`, when it would have
  // to wait (on the store), so the call goes on to the executor.
  using WithoutWaiting = std::function<bool(UnaryCall& call, Done& done)>;

  std::string name;  // "/<service>/<method>", the key of its access rule
  // Called first for every call, refused ones too, on the door's thread
  // (the legacy API counts each call and marks its answer deprecated);
  // optional.
  std::function<void(UnaryCall& call)> on_start;
  Blocking blocking;    // one of blocking and answering
  Answering answering;
  WithoutWaiting without_waiting;  // optional
  // What a refusal before the work becomes (the caller refused, the
  // executor's queue full), for a method that counts them or adds a retry
  // hint; optional.
  std::function<absl::Status(const UnaryCall& call, absl::Status refusal)>
      on_refusal;
  // Checks callers; null when authentication is off.
  const CallGuard* guard = nullptr;
  common::BlockingExecutor* executor = nullptr;
  // The time from the call's start to its answer (a refusal's too). Every
  // method has its own, exported by name (metricsd_call_seconds); shared
  // so that a method stays copyable.
  std::shared_ptr<common::Histogram> latency =
      std::make_shared<common::Histogram>(common::Histogram::LatencyBounds());
};

// `work(call, request, response)` on the method's own message types, as
// UnaryMethod::blocking.
template <typename Request, typename Response, typename Work>
UnaryMethod::Blocking Typed(Work work) {
  return [work = std::move(work)](UnaryCall& call) -> absl::Status {
    return work(call, static_cast<const Request&>(*call.request),
                static_cast<Response*>(call.response));
  };
}

// A method whose work may block, run on `executor` behind `guard`.
inline UnaryMethod BlockingMethod(std::string name, UnaryMethod::Blocking work,
                                  const CallGuard* guard,
                                  common::BlockingExecutor* executor) {
  UnaryMethod method;
  method.name = std::move(name);
  method.blocking = std::move(work);
  method.guard = guard;
  method.executor = executor;
  return method;
}

// Serves `call` by `method`, then calls `done` once, from any thread, with
// the call's status (a refusal that asks its caller to wait carries the
// wait: common::RetryAfterOf). RESOURCE_EXHAUSTED when the executor's queue
// is full. `method` and `call` must live until `done`.
void ServeUnaryCall(const UnaryMethod& method, UnaryCall& call,
                    std::function<void(absl::Status)> done);

// gRPC's door: serves a generated service's unary method with `method`.
// The wait of a refusal goes back as "retry-after-ms" trailing metadata.
grpc::ServerUnaryReactor* ServeGrpcCall(const UnaryMethod& method,
                                        grpc::CallbackServerContext* context,
                                        const google::protobuf::Message* request,
                                        google::protobuf::Message* response);

// The unary methods served in-process, by full name: what the REST gateway
// calls directly.
using UnaryMethods = absl::flat_hash_map<std::string, const UnaryMethod*>;

}  // namespace metrics::server

#endif  // METRICS_SERVER_SERVICES_UNARY_CALL_H_
