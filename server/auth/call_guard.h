// The check every call passes before its work when authentication is on:
// the caller's token (gRPC metadata "authorization", or "x-allocation-token"
// where the platform's harness sends a task's session token) is
// authenticated from the caller's address (its peer, or for the REST
// gateway's calls the HTTP client's address the gateway forwards), then the
// request is authorized by its method's rule. A limited peer's refusal
// carries "retry-after-ms" in the call's trailing metadata. A null guard
// means authentication is off (--auth=off) and every check passes.
//
// Thread-safety: thread-safe. Check may block on the token store: call it
// on an executor or a sync-API thread. CheckCached never blocks.
#ifndef METRICS_SERVER_AUTH_CALL_GUARD_H_
#define METRICS_SERVER_AUTH_CALL_GUARD_H_

#include <google/protobuf/message.h>
#include <grpcpp/server_context.h>

#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "server/auth/access_rules.h"
#include "server/auth/authenticator.h"
#include "server/auth/credential_watch.h"

namespace metrics::server {

class CallGuard {
 public:
  // `authenticator` and `watch` (null: open streams are not rechecked)
  // must outlive the guard.
  explicit CallGuard(Authenticator* authenticator,
                     CredentialWatch* watch = nullptr)
      : authenticator_(authenticator), watch_(watch) {}

  // OK when the caller may make this call with this request; else
  // UNAUTHENTICATED or PERMISSION_DENIED. `first_message`: false for a
  // stream's later messages. A method without a rule is refused.
  absl::Status Check(grpc::ServerContextBase& context,
                     absl::string_view method,
                     const google::protobuf::Message& request,
                     absl::Time deadline, bool first_message = true) const;

  // As Check, for a caller who presents `credential` (CredentialOf) from
  // `peer` (PeerOf): how both doors of a unary call check it
  // (server/services/unary_call.h). A limited caller's refusal carries its
  // wait (common::RetryAfterOf), which the door passes on.
  absl::Status Check(absl::string_view credential, absl::string_view peer,
                     absl::string_view method,
                     const google::protobuf::Message& request,
                     absl::Time deadline, bool first_message = true) const;

  // As Caller, for `credential` from `peer`.
  absl::StatusOr<Principal> Caller(absl::string_view credential,
                                   absl::string_view peer,
                                   absl::string_view method,
                                   const google::protobuf::Message& request,
                                   absl::Time deadline) const;

  // As CheckCached, for `credential` from `peer`.
  std::optional<absl::Status> CheckCached(
      absl::string_view credential, absl::string_view peer,
      absl::string_view method, const google::protobuf::Message& request,
      bool first_message = true) const;

  // As Check, and the caller when it passes (for a service that keeps a
  // reporter to its trial itself: Access::kIngestPerResource).
  absl::StatusOr<Principal> Caller(grpc::ServerContextBase& context,
                                   absl::string_view method,
                                   const google::protobuf::Message& request,
                                   absl::Time deadline) const;

  // As Check, from the authenticator's cache only: nullopt when the cache
  // cannot answer.
  std::optional<absl::Status> CheckCached(
      grpc::ServerContextBase& context, absl::string_view method,
      const google::protobuf::Message& request, bool first_message) const;

  // The caller of an HTTP request, for the HTTP-only doors (/metrics):
  // `authorization` is common::PresentedCredential of its headers, `peer`
  // the client's address.
  absl::Status CheckHttp(absl::string_view authorization,
                         absl::string_view peer, Access access,
                         absl::string_view what, absl::Time deadline) const;

  // For a door that can answer before it makes its call (the REST
  // gateway): the refusal of `credential` from `peer` for `method` when no
  // request could change it (the method needs a caller, and this one did
  // not authenticate, or its address is limited), so a refused request
  // costs no call. nullopt: the call decides (and checks again, from the
  // cache). May block on the store once.
  std::optional<absl::Status> RefusalBeforeCall(absl::string_view credential,
                                                absl::string_view peer,
                                                absl::string_view method,
                                                absl::Time deadline) const;

  // Watches `credential` (CredentialOf a stream that passed its check):
  // `refused` is called once (from another thread) when it stops
  // authenticating. Null when nothing watches (no CredentialWatch).
  std::unique_ptr<CredentialWatch::Watched> WatchStream(
      std::string credential, std::function<void(absl::Status)> refused) const;

  // Tells the authenticator that the token of `secret` was just created
  // here, so that a refusal it remembers does not outlive the creation.
  void Created(absl::string_view secret) const {
    authenticator_->Created(secret);
  }

  // The credential a call presents, as one header value.
  static std::string CredentialOf(const grpc::ServerContextBase& context);
  // The address a call comes from: its peer's, without the port; for a
  // call over the REST gateway's private socket, the address it forwards.
  static std::string PeerOf(const grpc::ServerContextBase& context);

 private:
  Authenticator* const authenticator_;
  CredentialWatch* const watch_;
};

// "/<service full name>/<method>", the key of the access rules.
std::string FullMethodName(absl::string_view service_full_name,
                           absl::string_view method);

// Check for a possibly null guard: OK when `guard` is null (auth off).
absl::Status CheckCall(const CallGuard* guard,
                       grpc::ServerContextBase& context,
                       absl::string_view method,
                       const google::protobuf::Message& request,
                       absl::Time deadline);

}  // namespace metrics::server

#endif  // METRICS_SERVER_AUTH_CALL_GUARD_H_
