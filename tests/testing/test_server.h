// The real metricsd server in-process on a throwaway database, on loopback
// ports chosen at run time, for gRPC and HTTP tests.
//
// Usage:
//   ASSERT_OK_AND_ASSIGN(auto server, TestServer::Start());
//   auto stub = v1::TrialService::NewStub(server->Channel());
//
// Thread-safety: thread-compatible.
#ifndef METRICS_TESTS_TESTING_TEST_SERVER_H_
#define METRICS_TESTS_TESTING_TEST_SERVER_H_

#include <grpcpp/channel.h>

#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "server/server_options.h"
#include "tests/testing/test_database.h"

// Declared only: a test that reaches into the server includes
// server/metrics_server.h itself, the others are spared parsing it.
namespace metrics::server {
class MetricsServer;
}  // namespace metrics::server
namespace metrics::storage {
class MetricStore;
}  // namespace metrics::storage

namespace metrics::test_util {

class TestServer {
 public:
  // Wraps the real store, e.g. in a FaultInjectingMetricStore.
  using StoreWrapper = std::function<std::unique_ptr<storage::MetricStore>(
      std::unique_ptr<storage::MetricStore>)>;

  // Creates a migrated database and starts a server on it, on the real
  // store wrapped by `wrap` if given. `options` is used as given except for
  // the database and the addresses.
  static absl::StatusOr<std::unique_ptr<TestServer>> Start(
      server::ServerOptions options = server::ServerOptions(),
      const StoreWrapper& wrap = nullptr);
  // A server on an existing database (`options.migrate` migrates it), as
  // Start does otherwise.
  static absl::StatusOr<std::unique_ptr<TestServer>> StartOn(
      std::string database_url,
      server::ServerOptions options = server::ServerOptions(),
      const StoreWrapper& wrap = nullptr);
  // Another server (a replica) on this one's database, as Start does
  // otherwise. It must be destroyed first.
  absl::StatusOr<std::unique_ptr<TestServer>> StartReplica(
      server::ServerOptions options = server::ServerOptions(),
      const StoreWrapper& wrap = nullptr) const;
  ~TestServer();

  std::shared_ptr<grpc::Channel> Channel() const;
  std::string grpc_target() const;
  int http_port() const;
  const std::string& database_url() const { return database_url_; }
  server::MetricsServer& server() { return *server_; }

 private:
  TestServer() = default;
  absl::Status Serve(server::ServerOptions options, const StoreWrapper& wrap);

  std::unique_ptr<TestDatabase> database_;  // null in a replica
  std::string database_url_;
  std::unique_ptr<server::MetricsServer> server_;
};

}  // namespace metrics::test_util

#endif  // METRICS_TESTS_TESTING_TEST_SERVER_H_
