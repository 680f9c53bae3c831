// The check every call passes before its work when authentication is on:
// the caller's token (gRPC metadata "authorization", or "x-allocation-token"
// where the platform's harness sends a task's session token) is
// authenticated, then the request is authorized by its method's rule. A
// null guard means authentication is off (--auth=off) and every check
// passes.
//
// Thread-safety: thread-safe. Check may block on the token store: call it
// on an executor or a sync-API thread. CheckCached never blocks.
#ifndef METRICS_SERVER_AUTH_CALL_GUARD_H_
#define METRICS_SERVER_AUTH_CALL_GUARD_H_

#include <google/protobuf/message.h>
#include <grpcpp/server_context.h>

#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "server/auth/access_rules.h"
#include "server/auth/authenticator.h"

namespace metrics::server {

class CallGuard {
 public:
  // `authenticator` must outlive the guard.
  explicit CallGuard(Authenticator* authenticator)
      : authenticator_(authenticator) {}

  // OK when the caller may make this call with this request; else
  // UNAUTHENTICATED or PERMISSION_DENIED. `first_message`: false for a
  // stream's later messages. A method without a rule is refused.
  absl::Status Check(const grpc::ServerContextBase& context,
                     absl::string_view method,
                     const google::protobuf::Message& request,
                     absl::Time deadline, bool first_message = true) const;

  // As Check, and the caller when it passes (for a service that keeps a
  // reporter to its trial itself: Access::kIngestPerResource).
  absl::StatusOr<Principal> Caller(const grpc::ServerContextBase& context,
                                   absl::string_view method,
                                   const google::protobuf::Message& request,
                                   absl::Time deadline) const;

  // As Check, from the authenticator's cache only: nullopt when the cache
  // cannot answer.
  std::optional<absl::Status> CheckCached(
      const grpc::ServerContextBase& context, absl::string_view method,
      const google::protobuf::Message& request, bool first_message) const;

  // The caller of an HTTP request, for the HTTP-only doors (/metrics):
  // `authorization` is common::PresentedCredential of its headers.
  absl::Status CheckHttp(absl::string_view authorization, Access access,
                         absl::string_view what, absl::Time deadline) const;

 private:
  static std::string AuthorizationOf(const grpc::ServerContextBase& context);

  Authenticator* const authenticator_;
};

// "/<service full name>/<method>", the key of the access rules.
std::string FullMethodName(absl::string_view service_full_name,
                           absl::string_view method);

// Check for a possibly null guard: OK when `guard` is null (auth off).
absl::Status CheckCall(const CallGuard* guard,
                       const grpc::ServerContextBase& context,
                       absl::string_view method,
                       const google::protobuf::Message& request,
                       absl::Time deadline);

}  // namespace metrics::server

#endif  // METRICS_SERVER_AUTH_CALL_GUARD_H_
