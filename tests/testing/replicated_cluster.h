// A PostgreSQL primary and a streaming-replication hot standby of it, made
// for one test: initdb in a temporary folder, the primary started there,
// pg_basebackup -R for the standby (which then streams from the primary),
// both listening only on Unix sockets in that folder, stopped and removed
// when the object dies (PgPrograms runs the binaries).
//
// Usage:
//   ASSERT_OK_AND_ASSIGN(auto cluster, ReplicatedCluster::Create());
//   ... write through cluster->primary_url("postgres") ...
//   ASSERT_OK(cluster->AwaitStandbyCaughtUp(absl::Seconds(10)));
//   ... read through cluster->standby_url("postgres") ...
//
// Thread-safety: thread-compatible.
#ifndef METRICS_TESTS_TESTING_REPLICATED_CLUSTER_H_
#define METRICS_TESTS_TESTING_REPLICATED_CLUSTER_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "tests/testing/pg_programs.h"

namespace metrics::test_util {

class ReplicatedCluster {
 public:
  enum class Server { kPrimary, kStandby };

  static absl::StatusOr<std::unique_ptr<ReplicatedCluster>> Create();
  ~ReplicatedCluster();

  ReplicatedCluster(const ReplicatedCluster&) = delete;
  ReplicatedCluster& operator=(const ReplicatedCluster&) = delete;

  // libpq keyword strings for `database` on each server.
  std::string primary_url(absl::string_view database) const;
  std::string standby_url(absl::string_view database) const;

  // Waits until the standby has replayed everything the primary has
  // written so far.
  absl::Status AwaitStandbyCaughtUp(absl::Duration timeout) const;

  // Stops or starts a server (pg_ctl -m fast; the data stays).
  absl::Status Stop(Server server);
  absl::Status Start(Server server);

 private:
  ReplicatedCluster(std::string dir, PgPrograms programs)
      : dir_(std::move(dir)), programs_(std::move(programs)) {}
  // Runs a PostgreSQL program (PgPrograms::Run).
  absl::Status Run(const std::string& program, std::vector<std::string> args) const;
  std::string DataDir(Server server) const;

  std::string dir_;  // the temporary folder, sockets included
  PgPrograms programs_;
  bool up_[2] = {false, false};  // by Server
};

}  // namespace metrics::test_util

#endif  // METRICS_TESTS_TESTING_REPLICATED_CLUSTER_H_
