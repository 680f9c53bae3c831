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

// `work`, refused when authentication is off.
template <typename Request, typename Response, typename Work>
UnaryMethod TokenCall(absl::string_view name, const CallGuard* guard,
                      common::BlockingExecutor* executor, Work work) {
  return BlockingMethod(
      TokenMethod(name),
      Typed<Request, Response>(
          [guard, work = std::move(work)](UnaryCall& call, const Request& request,
                                          Response* response) -> absl::Status {
            if (guard == nullptr) return AuthIsOff();
            return work(call, request, response);
          }),
      guard, executor);
}

}  // namespace

TokenService::TokenService(storage::TokenStore* tokens,
                           common::BlockingExecutor* executor,
                           const CallGuard* guard)
    : create_token_(TokenCall<v1::CreateTokenRequest, v1::CreateTokenResponse>(
          "CreateToken", guard, executor,
          [tokens, guard](UnaryCall& call, const v1::CreateTokenRequest& request,
                          v1::CreateTokenResponse* response) -> absl::Status {
            storage::TokenRequest spec;
            std::optional<storage::TokenRole> role = RoleFromProto(request.role());
            if (!role) {
              return absl::InvalidArgumentError(
                  "role: must be one of ADMIN, VIEWER, REPORTER");
            }
            if (request.ttl_seconds() < 0) {
              return absl::InvalidArgumentError(
                  "ttl_seconds: must be 0 (no expiry) or more");
            }
            spec.role = *role;
            spec.name = request.name();
            if (request.trial_id() != 0) spec.trial_id = request.trial_id();
            if (request.ttl_seconds() > 0) {
              spec.ttl = absl::Seconds(request.ttl_seconds());
            }
            absl::StatusOr<storage::CreatedToken> created =
                tokens->Create(spec, call.deadline);
            if (!created.ok()) return created.status();
            guard->Created(created->secret);
            TokenToProto(created->token, response->mutable_token());
            response->set_secret(created->secret);
            return absl::OkStatus();
          })),
      list_tokens_(TokenCall<v1::ListTokensRequest, v1::ListTokensResponse>(
          "ListTokens", guard, executor,
          [tokens](UnaryCall& call, const v1::ListTokensRequest&,
                   v1::ListTokensResponse* response) -> absl::Status {
            absl::StatusOr<std::vector<storage::ApiToken>> all =
                tokens->List(call.deadline);
            if (!all.ok()) return all.status();
            for (const storage::ApiToken& t : *all) {
              TokenToProto(t, response->add_tokens());
            }
            return absl::OkStatus();
          })),
      revoke_token_(TokenCall<v1::RevokeTokenRequest, v1::ApiToken>(
          "RevokeToken", guard, executor,
          [tokens](UnaryCall& call, const v1::RevokeTokenRequest& request,
                   v1::ApiToken* response) -> absl::Status {
            absl::StatusOr<storage::ApiToken> revoked =
                tokens->Revoke(request.id(), call.deadline);
            if (!revoked.ok()) return revoked.status();
            TokenToProto(*revoked, response);
            return absl::OkStatus();
          })) {}

std::vector<const UnaryMethod*> TokenService::UnaryMethodsServed() const {
  return {&create_token_, &list_tokens_, &revoke_token_};
}

grpc::ServerUnaryReactor* TokenService::CreateToken(
    grpc::CallbackServerContext* context, const v1::CreateTokenRequest* request,
    v1::CreateTokenResponse* response) {
  return ServeGrpcCall(create_token_, context, request, response);
}

grpc::ServerUnaryReactor* TokenService::ListTokens(
    grpc::CallbackServerContext* context, const v1::ListTokensRequest* request,
    v1::ListTokensResponse* response) {
  return ServeGrpcCall(list_tokens_, context, request, response);
}

grpc::ServerUnaryReactor* TokenService::RevokeToken(
    grpc::CallbackServerContext* context, const v1::RevokeTokenRequest* request,
    v1::ApiToken* response) {
  return ServeGrpcCall(revoke_token_, context, request, response);
}

}  // namespace metrics::server
