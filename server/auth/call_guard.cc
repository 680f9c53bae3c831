#include "server/auth/call_guard.h"

#include <google/protobuf/empty.pb.h>

#include "absl/strings/str_cat.h"
#include "common/presented_credential.h"

namespace metrics::server {

std::string FullMethodName(absl::string_view service_full_name,
                           absl::string_view method) {
  return absl::StrCat("/", service_full_name, "/", method);
}

std::string CallGuard::AuthorizationOf(const grpc::ServerContextBase& context) {
  const auto& metadata = context.client_metadata();
  auto value = [&metadata](absl::string_view key) -> absl::string_view {
    auto it = metadata.find(grpc::string_ref(key.data(), key.size()));
    if (it == metadata.end()) return {};
    return absl::string_view(it->second.data(), it->second.size());
  };
  return common::PresentedCredential(value("authorization"),
                                     value(common::kAllocationTokenMetadata));
}

absl::Status CallGuard::Check(const grpc::ServerContextBase& context,
                              absl::string_view method,
                              const google::protobuf::Message& request,
                              absl::Time deadline, bool first_message) const {
  const MethodRule* rule = RuleFor(method);
  if (rule == nullptr) {
    return absl::PermissionDeniedError(
        absl::StrCat(method, " has no access rule; it is refused to everyone"));
  }
  if (rule->access == Access::kOpen) return absl::OkStatus();
  absl::StatusOr<Principal> principal =
      authenticator_->Authenticate(AuthorizationOf(context), deadline);
  if (!principal.ok()) return principal.status();
  return Authorize(*principal, method, *rule, request, first_message);
}

absl::StatusOr<Principal> CallGuard::Caller(
    const grpc::ServerContextBase& context, absl::string_view method,
    const google::protobuf::Message& request, absl::Time deadline) const {
  const MethodRule* rule = RuleFor(method);
  if (rule == nullptr || rule->access == Access::kOpen) {
    return absl::PermissionDeniedError(
        absl::StrCat(method, " has no rule that names its callers"));
  }
  absl::StatusOr<Principal> principal =
      authenticator_->Authenticate(AuthorizationOf(context), deadline);
  if (!principal.ok()) return principal.status();
  if (absl::Status allowed = Authorize(*principal, method, *rule, request, true);
      !allowed.ok()) {
    return allowed;
  }
  return principal;
}

std::optional<absl::Status> CallGuard::CheckCached(
    const grpc::ServerContextBase& context, absl::string_view method,
    const google::protobuf::Message& request, bool first_message) const {
  const MethodRule* rule = RuleFor(method);
  if (rule == nullptr || rule->access == Access::kOpen) {
    return Check(context, method, request, absl::InfinitePast(), first_message);
  }
  std::optional<absl::StatusOr<Principal>> principal =
      authenticator_->FromCache(AuthorizationOf(context));
  if (!principal.has_value()) return std::nullopt;
  if (!principal->ok()) return principal->status();
  return Authorize(**principal, method, *rule, request, first_message);
}

absl::Status CallGuard::CheckHttp(absl::string_view authorization,
                                  Access access, absl::string_view what,
                                  absl::Time deadline) const {
  absl::StatusOr<Principal> principal =
      authenticator_->Authenticate(authorization, deadline);
  if (!principal.ok()) return principal.status();
  MethodRule rule;
  rule.access = access;
  google::protobuf::Empty none;
  return Authorize(*principal, what, rule, none, true);
}

absl::Status CheckCall(const CallGuard* guard,
                       const grpc::ServerContextBase& context,
                       absl::string_view method,
                       const google::protobuf::Message& request,
                       absl::Time deadline) {
  if (guard == nullptr) return absl::OkStatus();
  return guard->Check(context, method, request, deadline);
}

}  // namespace metrics::server
