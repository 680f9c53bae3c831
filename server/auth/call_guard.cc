#include "server/auth/call_guard.h"

#include <google/protobuf/empty.pb.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "common/presented_credential.h"
#include "common/retry_after.h"

namespace metrics::server {

std::string FullMethodName(absl::string_view service_full_name,
                           absl::string_view method) {
  return absl::StrCat("/", service_full_name, "/", method);
}

namespace {

absl::string_view MetadataValue(const grpc::ServerContextBase& context,
                                absl::string_view key) {
  const auto& metadata = context.client_metadata();
  auto it = metadata.find(grpc::string_ref(key.data(), key.size()));
  if (it == metadata.end()) return {};
  return absl::string_view(it->second.data(), it->second.size());
}

// A limited caller's wait, as gRPC clients read it.
void AddRetryAfter(const absl::Status& refusal, grpc::ServerContextBase& context) {
  if (std::optional<absl::Duration> wait = common::RetryAfterOf(refusal)) {
    context.AddTrailingMetadata(
        "retry-after-ms", absl::StrCat(absl::ToInt64Milliseconds(*wait)));
  }
}

}  // namespace

std::string CallGuard::CredentialOf(const grpc::ServerContextBase& context) {
  return common::PresentedCredential(
      MetadataValue(context, "authorization"),
      MetadataValue(context, common::kAllocationTokenMetadata));
}

std::string CallGuard::PeerOf(const grpc::ServerContextBase& context) {
  const std::string peer = context.peer();
  absl::string_view rest = peer;
  // Only this process's gateway can reach the private socket (mode 0700),
  // so only there is the forwarded address believed.
  if (absl::ConsumePrefix(&rest, "unix:")) {
    return std::string(MetadataValue(context, "x-forwarded-for"));
  }
  return PeerLimiter::AddressOfGrpcPeer(peer);
}

absl::Status CallGuard::Check(grpc::ServerContextBase& context,
                              absl::string_view method,
                              const google::protobuf::Message& request,
                              absl::Time deadline, bool first_message) const {
  absl::Status allowed = Check(CredentialOf(context), PeerOf(context), method,
                               request, deadline, first_message);
  AddRetryAfter(allowed, context);
  return allowed;
}

absl::Status CallGuard::Check(absl::string_view credential,
                              absl::string_view peer, absl::string_view method,
                              const google::protobuf::Message& request,
                              absl::Time deadline, bool first_message) const {
  const MethodRule* rule = RuleFor(method);
  if (rule == nullptr) {
    return absl::PermissionDeniedError(
        absl::StrCat(method, " has no access rule; it is refused to everyone"));
  }
  if (rule->access == Access::kOpen) return absl::OkStatus();
  absl::StatusOr<Principal> principal =
      authenticator_->Authenticate(credential, peer, deadline);
  if (!principal.ok()) return principal.status();
  return Authorize(*principal, method, *rule, request, first_message);
}

std::optional<absl::Status> CallGuard::CheckCached(
    absl::string_view credential, absl::string_view peer,
    absl::string_view method, const google::protobuf::Message& request,
    bool first_message) const {
  const MethodRule* rule = RuleFor(method);
  if (rule == nullptr || rule->access == Access::kOpen) {
    return Check(credential, peer, method, request, absl::InfinitePast(),
                 first_message);
  }
  std::optional<absl::StatusOr<Principal>> principal =
      authenticator_->FromCache(credential, peer);
  if (!principal.has_value()) return std::nullopt;
  if (!principal->ok()) return principal->status();
  return Authorize(**principal, method, *rule, request, first_message);
}

absl::StatusOr<Principal> CallGuard::Caller(
    grpc::ServerContextBase& context, absl::string_view method,
    const google::protobuf::Message& request, absl::Time deadline) const {
  absl::StatusOr<Principal> caller = Caller(CredentialOf(context), PeerOf(context),
                                            method, request, deadline);
  AddRetryAfter(caller.status(), context);
  return caller;
}

absl::StatusOr<Principal> CallGuard::Caller(
    absl::string_view credential, absl::string_view peer,
    absl::string_view method, const google::protobuf::Message& request,
    absl::Time deadline) const {
  const MethodRule* rule = RuleFor(method);
  if (rule == nullptr || rule->access == Access::kOpen) {
    return absl::PermissionDeniedError(
        absl::StrCat(method, " has no rule that names its callers"));
  }
  absl::StatusOr<Principal> principal =
      authenticator_->Authenticate(credential, peer, deadline);
  if (!principal.ok()) return principal.status();
  if (absl::Status allowed = Authorize(*principal, method, *rule, request, true);
      !allowed.ok()) {
    return allowed;
  }
  return principal;
}

std::optional<absl::Status> CallGuard::CheckCached(
    grpc::ServerContextBase& context, absl::string_view method,
    const google::protobuf::Message& request, bool first_message) const {
  std::optional<absl::Status> allowed = CheckCached(
      CredentialOf(context), PeerOf(context), method, request, first_message);
  if (allowed.has_value()) AddRetryAfter(*allowed, context);
  return allowed;
}

absl::Status CallGuard::CheckHttp(absl::string_view authorization,
                                  absl::string_view peer, Access access,
                                  absl::string_view what,
                                  absl::Time deadline) const {
  absl::StatusOr<Principal> principal =
      authenticator_->Authenticate(authorization, peer, deadline);
  if (!principal.ok()) return principal.status();
  MethodRule rule;
  rule.access = access;
  google::protobuf::Empty none;
  return Authorize(*principal, what, rule, none, true);
}

std::optional<absl::Status> CallGuard::RefusalBeforeCall(
    absl::string_view credential, absl::string_view peer,
    absl::string_view method, absl::Time deadline) const {
  const MethodRule* rule = RuleFor(method);
  if (rule == nullptr || rule->access == Access::kOpen) return std::nullopt;
  absl::StatusOr<Principal> principal =
      authenticator_->Authenticate(credential, peer, deadline);
  const absl::StatusCode code = principal.status().code();
  if (code == absl::StatusCode::kUnauthenticated ||
      code == absl::StatusCode::kResourceExhausted) {
    return principal.status();
  }
  return std::nullopt;  // authenticated, or the store could not say
}

std::unique_ptr<CredentialWatch::Watched> CallGuard::WatchStream(
    std::string credential, std::function<void(absl::Status)> refused) const {
  if (watch_ == nullptr) return nullptr;
  return watch_->Watch(std::move(credential), std::move(refused));
}

absl::Status CheckCall(const CallGuard* guard,
                       grpc::ServerContextBase& context,
                       absl::string_view method,
                       const google::protobuf::Message& request,
                       absl::Time deadline) {
  if (guard == nullptr) return absl::OkStatus();
  return guard->Check(context, method, request, deadline);
}

}  // namespace metrics::server
