#include "tests/testing/test_server.h"

#include <grpcpp/create_channel.h>
#include <grpcpp/security/credentials.h>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace metrics::testing {

absl::StatusOr<std::unique_ptr<TestServer>> TestServer::Start(
    server::ServerOptions options) {
  std::unique_ptr<TestServer> test(new TestServer());
  ASSIGN_OR_RETURN(test->database_, TestDatabase::Create());
  options.database_url = test->database_->url();
  options.grpc_address = "127.0.0.1:0";
  options.http.address = "127.0.0.1:0";
  ASSIGN_OR_RETURN(test->server_,
                   server::MetricsServer::Create(
                       std::move(options), [](absl::string_view) {}));
  return test;
}

TestServer::~TestServer() {
  if (server_ != nullptr) server_->Shutdown(absl::Seconds(5));
  server_.reset();  // before the database it uses is dropped
}

std::string TestServer::grpc_target() const {
  return absl::StrCat("127.0.0.1:", server_->grpc_port());
}

std::shared_ptr<grpc::Channel> TestServer::Channel() const {
  return grpc::CreateChannel(grpc_target(), grpc::InsecureChannelCredentials());
}

}  // namespace metrics::testing
