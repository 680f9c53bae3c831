// A PostgreSQL formation run by pg_auto_failover, made for one test: a
// monitor and `nodes` PostgreSQL nodes, each a `pg_autoctl` keeper with its
// server, on loopback ports chosen at run time, in a temporary folder
// removed when the object dies. The first node starts as the primary, the
// others as its synchronous standbys (pg_auto_failover's default with
// replication quorum on). The monitor's failure detection is shortened from
// its production defaults (20 s to call a node unhealthy, 30 s to wait for
// a lost primary's demotion) to 2 s and 5 s, and the keepers' network
// partition timeout to 3 s accordingly, so a failover takes seconds.
//
// Usage:
//   ASSERT_OK_AND_ASSIGN(auto cluster, AutoFailoverCluster::Create(2));
//   ... metricsd --database-url=cluster->url("metrics") ...
//   ASSERT_OK(cluster->Kill(0));          // the primary's host dies
//   ASSERT_OK(cluster->AwaitPrimary(1, absl::Seconds(60)));
//   ASSERT_OK(cluster->Start(0));         // it comes back...
//   ASSERT_OK(cluster->AwaitState(0, "secondary", absl::Seconds(60)));
//
// Thread-safety: thread-compatible.
#ifndef METRICS_TESTS_TESTING_AUTO_FAILOVER_CLUSTER_H_
#define METRICS_TESTS_TESTING_AUTO_FAILOVER_CLUSTER_H_

#include <sys/types.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "storage/pg/testing/pg_checks.h"
#include "tests/testing/pg_programs.h"

namespace metrics::test_util {

class AutoFailoverCluster {
 public:
  // The monitor and `nodes` (2 or more) nodes, with database `metrics`
  // created on the primary; returns once every standby is `secondary`.
  static absl::StatusOr<std::unique_ptr<AutoFailoverCluster>> Create(int nodes);
  ~AutoFailoverCluster();  // kills every process, removes the folder

  AutoFailoverCluster(const AutoFailoverCluster&) = delete;
  AutoFailoverCluster& operator=(const AutoFailoverCluster&) = delete;

  // The libpq URI an application uses: every node's host and port, with
  // target_session_attrs=read-write, so libpq connects to the primary
  // wherever it is (or `session`, e.g. "prefer-standby" for reads).
  std::string url(absl::string_view database,
                  absl::string_view session = "read-write") const;
  // One node's own URI (whatever its role).
  std::string node_url(int node, absl::string_view database) const;

  // The node's host dies: its keeper and server are killed with SIGKILL.
  absl::Status Kill(int node);
  // The node's server is stopped in immediate mode (no shutdown
  // checkpoint), as a host cut off mid-work, and its keeper with it.
  absl::Status StopImmediately(int node);
  // Starts a killed or stopped node's keeper again, which restarts its
  // server and rejoins the formation (rewinding a former primary).
  absl::Status Start(int node);

  // Waits until the monitor reports `state` (reported and assigned alike,
  // e.g. "primary", "secondary", "wait_primary") for the node.
  absl::Status AwaitState(int node, absl::string_view state,
                          absl::Duration timeout) const;
  // Waits until the node is the formation's writable primary ("primary";
  // "wait_primary", which accepts writes while no standby is in sync; or
  // "single", a formation's only node).
  absl::Status AwaitPrimary(int node, absl::Duration timeout) const;

  // "name reported/assigned" of every node, for failure messages.
  std::string Describe() const;

 private:
  struct Node {
    int port = 0;
    pid_t keeper = -1;  // its process group; -1 while down
  };

  AutoFailoverCluster(std::string dir, PgPrograms programs)
      : dir_(std::move(dir)), programs_(std::move(programs)) {}

  std::string DataDir(int node) const;  // node -1: the monitor
  std::string monitor_url(absl::string_view database) const;
  // The environment of every pg_autoctl run: its configuration and state
  // under the folder (the servers' sockets are in PostgreSQL's usual
  // folder, told apart by their ports).
  std::vector<std::string> Env() const;
  absl::StatusOr<std::string> Autoctl(std::vector<std::string> args) const;
  absl::Status SpawnKeeper(int node, std::vector<std::string> args);
  absl::Status KillKeeper(int node);
  // The monitor's "reported/assigned" for the node; "" when unknown.
  std::string StateOf(int node) const;
  // What StateOf and Describe ask the monitor over: one connection for the
  // polls of a whole failover, not one a poll (each a backend's start).
  storage::pg::test_util::Session& MonitorSession() const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(monitor_mu_);

  std::string dir_;
  PgPrograms programs_;
  int monitor_port_ = 0;
  pid_t monitor_ = -1;
  std::vector<Node> nodes_;
  mutable absl::Mutex monitor_mu_;
  mutable std::unique_ptr<storage::pg::test_util::Session> monitor_session_
      ABSL_GUARDED_BY(monitor_mu_);
};

}  // namespace metrics::test_util

#endif  // METRICS_TESTS_TESTING_AUTO_FAILOVER_CLUSTER_H_
