// The REST gateway's start: every routed unary method must be served in
// this process (REST then calls it as gRPC's door does); a gateway that
// would send one over its socket does not start.
#include "server/rest/rest_gateway.h"

#include <grpcpp/create_channel.h>

#include <list>

#include "absl/strings/str_cat.h"
#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "proto/metrics/v1/trials.pb.h"

namespace metrics::server {
namespace {

using ::metrics::test_util::StatusIs;
using ::testing::HasSubstr;

const google::protobuf::ServiceDescriptor& TrialServiceDescriptor() {
  // Through a generated message, so the file is linked in.
  return *v1::Trial::descriptor()->file()->FindServiceByName("TrialService");
}

absl::StatusOr<std::unique_ptr<RestGateway>> Gateway(UnaryMethods unary) {
  // Never called: the start is refused or accepted before any call.
  auto channel = grpc::CreateChannel("unix:/nonexistent/gateway",
                                     grpc::InsecureChannelCredentials());
  return RestGateway::Create(channel, {TrialServiceDescriptor().full_name()},
                             RestGatewayOptions(), std::move(unary));
}

TEST(RestGatewayTest, StartsWhenEveryRoutedUnaryMethodIsServedInProcess) {
  std::list<UnaryMethod> methods;
  UnaryMethods unary;
  const google::protobuf::ServiceDescriptor& service = TrialServiceDescriptor();
  for (int i = 0; i < service.method_count(); ++i) {
    if (service.method(i)->server_streaming()) continue;
    UnaryMethod& method = methods.emplace_back();
    method.name = absl::StrCat("/", service.full_name(), "/", service.method(i)->name());
    unary[method.name] = &method;
  }
  EXPECT_OK(Gateway(unary).status());

  // One left out: the gateway would have had to call it over its socket.
  unary.erase("/metrics.v1.TrialService/UpdateTrial");
  EXPECT_THAT(Gateway(unary).status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("/metrics.v1.TrialService/UpdateTrial is not served in "
                                 "this process")));
}

}  // namespace
}  // namespace metrics::server
