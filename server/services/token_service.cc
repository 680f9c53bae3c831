#include "server/services/token_service.h"

#include <optional>
#include <string>

#include "common/grpc_status.h"
#include "common/proto_time.h"
#include "server/services/unary_call.h"

namespace metrics::server {

namespace {

std::string TokenMethod(absl::string_view name) {
  return FullMethodName(v1::TokenService::service_full_name(), name);
}

absl::Status AuthIsOff() {
  return absl::FailedPreconditionError(
      "tokens are served only by a metricsd with --auth=required (a token "
      "minted while anyone may call would be anyone's); use metricsctl "
      "tokens");
}

std::optional<storage::TokenRole> RoleFromProto(v1::ApiToken::Role role) {
  switch (role) {
    case v1::ApiToken::ADMIN:
      return storage::TokenRole::kAdmin;
    case v1::ApiToken::VIEWER:
      return storage::TokenRole::kViewer;
    case v1::ApiToken::REPORTER:
      return storage::TokenRole::kReporter;
    default:
      return std::nullopt;
  }
}

v1::ApiToken::Role RoleToProto(storage::TokenRole role) {
  switch (role) {
    case storage::TokenRole::kAdmin:
      return v1::ApiToken::ADMIN;
    case storage::TokenRole::kViewer:
      return v1::ApiToken::VIEWER;
    case storage::TokenRole::kReporter:
      return v1::ApiToken::REPORTER;
  }
  return v1::ApiToken::ROLE_UNSPECIFIED;
}

void TokenToProto(const storage::ApiToken& t, v1::ApiToken* proto) {
  proto->set_id(t.id);
  proto->set_name(t.name);
  proto->set_role(RoleToProto(t.role));
  proto->set_trial_id(t.trial_id.value_or(0));
  common::MicrosToProto(t.created_at_us, proto->mutable_created_at());
  if (t.expires_at_us) {
    common::MicrosToProto(*t.expires_at_us, proto->mutable_expires_at());
  }
  if (t.revoked_at_us) {
    common::MicrosToProto(*t.revoked_at_us, proto->mutable_revoked_at());
  }
}

// Refuses at once when authentication is off; else runs `work` behind the
// admin check on the executor.
template <typename Work>
grpc::ServerUnaryReactor* Run(grpc::CallbackServerContext* context,
                              common::BlockingExecutor* executor,
                              const CallGuard* guard, absl::string_view name,
                              const google::protobuf::Message* request,
                              Work work) {
  if (guard == nullptr) {
    grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
    reactor->Finish(common::ToGrpcStatus(AuthIsOff()));
    return reactor;
  }
  if (auto* refused = RefusedFromCache(context, guard, TokenMethod(name), *request)) {
    return refused;
  }
  return RunOnExecutor(context, executor,
                       Guarded(guard, context, TokenMethod(name), request,
                               std::move(work)));
}

}  // namespace

grpc::ServerUnaryReactor* TokenService::CreateToken(
    grpc::CallbackServerContext* context, const v1::CreateTokenRequest* request,
    v1::CreateTokenResponse* response) {
  return Run(
      context, executor_, guard_, "CreateToken", request,
      [tokens = tokens_, guard = guard_, request,
       response](absl::Time deadline) -> absl::Status {
        storage::TokenRequest spec;
        std::optional<storage::TokenRole> role = RoleFromProto(request->role());
        if (!role) {
          return absl::InvalidArgumentError(
              "role: must be one of ADMIN, VIEWER, REPORTER");
        }
        if (request->ttl_seconds() < 0) {
          return absl::InvalidArgumentError(
              "ttl_seconds: must be 0 (no expiry) or more");
        }
        spec.role = *role;
        spec.name = request->name();
        if (request->trial_id() != 0) spec.trial_id = request->trial_id();
        if (request->ttl_seconds() > 0) {
          spec.ttl = absl::Seconds(request->ttl_seconds());
        }
        absl::StatusOr<storage::CreatedToken> created =
            tokens->Create(spec, deadline);
        if (!created.ok()) return created.status();
        guard->Created(created->secret);
        TokenToProto(created->token, response->mutable_token());
        response->set_secret(created->secret);
        return absl::OkStatus();
      });
}

grpc::ServerUnaryReactor* TokenService::ListTokens(
    grpc::CallbackServerContext* context, const v1::ListTokensRequest* request,
    v1::ListTokensResponse* response) {
  return Run(context, executor_, guard_, "ListTokens", request,
             [tokens = tokens_, response](absl::Time deadline) -> absl::Status {
               absl::StatusOr<std::vector<storage::ApiToken>> all =
                   tokens->List(deadline);
               if (!all.ok()) return all.status();
               for (const storage::ApiToken& t : *all) {
                 TokenToProto(t, response->add_tokens());
               }
               return absl::OkStatus();
             });
}

grpc::ServerUnaryReactor* TokenService::RevokeToken(
    grpc::CallbackServerContext* context, const v1::RevokeTokenRequest* request,
    v1::ApiToken* response) {
  return Run(context, executor_, guard_, "RevokeToken", request,
             [tokens = tokens_, id = request->id(),
              response](absl::Time deadline) -> absl::Status {
               absl::StatusOr<storage::ApiToken> revoked =
                   tokens->Revoke(id, deadline);
               if (!revoked.ok()) return revoked.status();
               TokenToProto(*revoked, response);
               return absl::OkStatus();
             });
}

}  // namespace metrics::server
