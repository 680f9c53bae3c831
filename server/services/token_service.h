// metrics.v1.TokenService: API tokens over gRPC (and the REST gateway), for
// the platform to mint a trial's reporter token. Admin tokens only (the
// access rules); with authentication off every call is refused, so no
// token is minted while anyone may call.
//
// Thread-safety: thread-safe; calls run on the blocking executor.
#ifndef METRICS_SERVER_SERVICES_TOKEN_SERVICE_H_
#define METRICS_SERVER_SERVICES_TOKEN_SERVICE_H_

#include <vector>

#include "common/blocking_executor.h"
#include "proto/metrics/v1/tokens.grpc.pb.h"
#include "server/auth/call_guard.h"
#include "server/services/unary_call.h"
#include "storage/token_store.h"

namespace metrics::server {

class TokenService final : public v1::TokenService::CallbackService {
 public:
  // `tokens`, `executor` and `guard` must outlive the service; both
  // `tokens` and `guard` are null when authentication is off.
  TokenService(storage::TokenStore* tokens,
               common::BlockingExecutor* executor, const CallGuard* guard);

  // The unary methods, for the REST gateway.
  std::vector<const UnaryMethod*> UnaryMethodsServed() const;

  grpc::ServerUnaryReactor* CreateToken(
      grpc::CallbackServerContext* context,
      const v1::CreateTokenRequest* request,
      v1::CreateTokenResponse* response) override;
  grpc::ServerUnaryReactor* ListTokens(grpc::CallbackServerContext* context,
                                       const v1::ListTokensRequest* request,
                                       v1::ListTokensResponse* response) override;
  grpc::ServerUnaryReactor* RevokeToken(grpc::CallbackServerContext* context,
                                        const v1::RevokeTokenRequest* request,
                                        v1::ApiToken* response) override;

 private:
  const UnaryMethod create_token_;
  const UnaryMethod list_tokens_;
  const UnaryMethod revoke_token_;
};

}  // namespace metrics::server

#endif  // METRICS_SERVER_SERVICES_TOKEN_SERVICE_H_
