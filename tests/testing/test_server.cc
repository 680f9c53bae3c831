#include "tests/testing/test_server.h"

#include <grpcpp/create_channel.h>
#include <grpcpp/security/credentials.h>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "server/metrics_server.h"
#include "storage/pg/pg_metric_store.h"

namespace metrics::test_util {

absl::StatusOr<std::unique_ptr<TestServer>> TestServer::Start(
    server::ServerOptions options, const StoreWrapper& wrap) {
  std::unique_ptr<TestServer> test(new TestServer());
  ASSIGN_OR_RETURN(test->database_, TestDatabase::Create());
  test->database_url_ = test->database_->url();
  RETURN_IF_ERROR(test->Serve(std::move(options), wrap));
  return test;
}

absl::StatusOr<std::unique_ptr<TestServer>> TestServer::StartOn(
    std::string database_url, server::ServerOptions options,
    const StoreWrapper& wrap) {
  std::unique_ptr<TestServer> test(new TestServer());
  test->database_url_ = std::move(database_url);
  RETURN_IF_ERROR(test->Serve(std::move(options), wrap));
  return test;
}

absl::StatusOr<std::unique_ptr<TestServer>> TestServer::StartReplica(
    server::ServerOptions options, const StoreWrapper& wrap) const {
  return StartOn(database_url_, std::move(options), wrap);
}

absl::Status TestServer::Serve(server::ServerOptions options,
                               const StoreWrapper& wrap) {
  options.database_url = database_url_;
  options.grpc_address = "127.0.0.1:0";
  options.http.address = "127.0.0.1:0";
  auto quiet = [](absl::string_view) {};
  if (wrap == nullptr) {
    ASSIGN_OR_RETURN(server_,
                     server::MetricsServer::Create(std::move(options), quiet));
    return absl::OkStatus();
  }
  storage::pg::PgMetricStoreOptions store = options.store;
  store.database_url = options.database_url;
  ASSIGN_OR_RETURN(server_,
                   server::MetricsServer::CreateOnStore(
                       std::move(options),
                       wrap(storage::pg::PgMetricStore::Create(std::move(store))),
                       quiet));
  return absl::OkStatus();
}

TestServer::~TestServer() {
  if (server_ != nullptr) server_->Shutdown(absl::Seconds(5));
  server_.reset();  // before the database it uses is dropped
}

int TestServer::http_port() const { return server_->http_port(); }

std::string TestServer::grpc_target() const {
  return absl::StrCat("127.0.0.1:", server_->grpc_port());
}

std::shared_ptr<grpc::Channel> TestServer::Channel() const {
  return grpc::CreateChannel(grpc_target(), grpc::InsecureChannelCredentials());
}

}  // namespace metrics::test_util
