#include "tests/testing/auto_failover_cluster.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "common/status_macros.h"
#include "storage/pg/testing/pg_checks.h"

namespace metrics::test_util {
namespace {

namespace pgtest = ::metrics::storage::pg::test_util;

// A loopback port nothing listens on now (the kernel's choice; another
// process could take it before PostgreSQL does, which the test would
// report as a failure to start).
absl::StatusOr<int> UnusedPort() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return absl::InternalError("socket failed");
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof(address);
  int port = -1;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) == 0) {
    port = ntohs(address.sin_port);
  }
  ::close(fd);
  if (port < 0) return absl::InternalError("no free loopback port");
  return port;
}

// The monitor's failure detection, shortened for a test (production
// defaults in parentheses): a health check each second (5 s), failed after
// 1 s (5 s) and one retry (2); a node unhealthy after 2 s without its
// keeper's word (20 s); a lost primary waited for 5 s before its standby is
// promoted (30 s). Those 5 s stay above the keepers' network partition
// timeout (3 s, set below), after which a primary cut off from the monitor
// and its standbys demotes itself: never two primaries.
constexpr const char* kMonitorSettings[][2] = {
    {"pgautofailover.health_check_period", "1000"},
    {"pgautofailover.health_check_timeout", "1000"},
    {"pgautofailover.health_check_max_retries", "1"},
    {"pgautofailover.health_check_retry_delay", "500"},
    {"pgautofailover.node_considered_unhealthy_timeout", "2000"},
    {"pgautofailover.primary_demote_timeout", "5000"},
};

}  // namespace

absl::StatusOr<std::unique_ptr<AutoFailoverCluster>> AutoFailoverCluster::Create(
    int nodes) {
  if (nodes < 2) return absl::InvalidArgumentError("a formation needs 2 nodes or more");
  ASSIGN_OR_RETURN(PgPrograms programs, PgPrograms::Find());
  ASSIGN_OR_RETURN(std::string folder, programs.MakeFolder("metrics-autofailover"));
  std::unique_ptr<AutoFailoverCluster> cluster(
      new AutoFailoverCluster(std::move(folder), std::move(programs)));
  AutoFailoverCluster& c = *cluster;
  ASSIGN_OR_RETURN(c.monitor_port_, UnusedPort());
  const std::string pg_ctl = c.programs_.bindir() + "/pg_ctl";
  RETURN_IF_ERROR(c.Autoctl({"create", "monitor", "--pgdata", c.DataDir(-1),
                             "--pgport", std::to_string(c.monitor_port_),
                             "--hostname", "127.0.0.1", "--listen", "127.0.0.1",
                             "--auth", "trust", "--no-ssl", "--pgctl", pg_ctl})
                      .status());
  ASSIGN_OR_RETURN(c.monitor_, c.programs_.Spawn({"pg_autoctl", "run", "--pgdata",
                                                  c.DataDir(-1)},
                                                 c.Env(), c.dir_ + "/monitor.log"));
  absl::Status up;
  for (const absl::Time deadline = absl::Now() + absl::Seconds(60);;) {
    up = pgtest::QueryScalar(c.monitor_url("pg_auto_failover"), "SELECT 1").status();
    if (up.ok() || absl::Now() > deadline) break;
    absl::SleepFor(absl::Milliseconds(100));
  }
  RETURN_IF_ERROR(up);
  for (const auto& [name, value] : kMonitorSettings) {
    RETURN_IF_ERROR(pgtest::QueryScalar(c.monitor_url("pg_auto_failover"),
                                        absl::StrCat("ALTER SYSTEM SET ", name,
                                                     " = ", value))
                        .status());
  }
  RETURN_IF_ERROR(pgtest::QueryScalar(c.monitor_url("pg_auto_failover"),
                                      "SELECT pg_reload_conf()")
                      .status());

  c.nodes_.resize(nodes);
  for (int i = 0; i < nodes; ++i) {
    ASSIGN_OR_RETURN(c.nodes_[i].port, UnusedPort());
    // A standby's base backup starts with a checkpoint on the primary, which
    // PostgreSQL spreads over minutes unless asked for one now.
    std::atomic<bool> created{false};
    std::thread hurry;
    if (i > 0) {
      hurry = std::thread([&] {
        while (!created.load()) {
          (void)pgtest::QueryScalar(c.node_url(0, "postgres"), "CHECKPOINT");
          absl::SleepFor(absl::Milliseconds(500));
        }
      });
    }
    const absl::Status made =
        c.Autoctl({"create", "postgres", "--pgdata", c.DataDir(i), "--pgport",
                   std::to_string(c.nodes_[i].port), "--hostname", "127.0.0.1",
                   "--listen", "127.0.0.1", "--name", absl::StrCat("node", i),
                   "--monitor",
                   absl::StrCat("postgres://autoctl_node@127.0.0.1:", c.monitor_port_,
                                "/pg_auto_failover?sslmode=disable"),
                   "--dbname", "metrics", "--auth", "trust", "--no-ssl",
                   "--pgctl", pg_ctl})
            .status();
    created = true;
    if (hurry.joinable()) hurry.join();
    RETURN_IF_ERROR(made);
    RETURN_IF_ERROR(c.Autoctl({"config", "set", "--pgdata", c.DataDir(i),
                               "timeout.network_partition_timeout", "3"})
                        .status());
    RETURN_IF_ERROR(c.Start(i));
    if (i == 0) {
      RETURN_IF_ERROR(c.AwaitPrimary(0, absl::Seconds(60)));
    } else {
      RETURN_IF_ERROR(c.AwaitState(i, "secondary", absl::Seconds(90)));
    }
  }
  // With every standby in, the primary leaves wait_primary for primary:
  // from then on its commits wait for a synchronous standby.
  RETURN_IF_ERROR(c.AwaitState(0, "primary", absl::Seconds(60)));
  return cluster;
}

AutoFailoverCluster::~AutoFailoverCluster() {
  // Each server is stopped by its keeper (`pg_autoctl stop --immediate`)
  // before anything is killed: PostgreSQL's children lead sessions of their
  // own, out of reach of a signal to the keeper's group, and the monitor's
  // health check worker outlives a killed postmaster.
  for (int i = -1; i < static_cast<int>(nodes_.size()); ++i) {
    pid_t& keeper = i < 0 ? monitor_ : nodes_[i].keeper;
    if (keeper > 0) {
      (void)Autoctl({"stop", "--pgdata", DataDir(i), "--immediate"});
      for (const absl::Time deadline = absl::Now() + absl::Seconds(10);
           absl::Now() < deadline && ::waitpid(keeper, nullptr, WNOHANG) != keeper;) {
        absl::SleepFor(absl::Milliseconds(20));
      }
      ::killpg(keeper, SIGKILL);  // what is left of it
      ::waitpid(keeper, nullptr, WNOHANG);
      keeper = -1;
    }
    // A server whose keeper was gone before it stopped it.
    (void)programs_.Run("pg_ctl", {"-D", DataDir(i), "-m", "immediate", "-w", "stop"});
  }
  std::error_code ignored;
  std::filesystem::remove_all(dir_, ignored);
}

std::string AutoFailoverCluster::url(absl::string_view database,
                                     absl::string_view session) const {
  std::vector<std::string> hosts;
  for (const Node& node : nodes_) {
    hosts.push_back(absl::StrCat("127.0.0.1:", node.port));
  }
  return absl::StrCat("postgresql://", absl::StrJoin(hosts, ","), "/", database,
                      "?user=postgres&target_session_attrs=", session,
                      "&connect_timeout=2");
}

std::string AutoFailoverCluster::node_url(int node, absl::string_view database) const {
  return absl::StrCat("postgresql://127.0.0.1:", nodes_[node].port, "/", database,
                      "?user=postgres&connect_timeout=2");
}

std::string AutoFailoverCluster::monitor_url(absl::string_view database) const {
  return absl::StrCat("postgresql://127.0.0.1:", monitor_port_, "/", database,
                      "?user=postgres&connect_timeout=2");
}

std::string AutoFailoverCluster::DataDir(int node) const {
  return node < 0 ? dir_ + "/monitor" : absl::StrCat(dir_, "/node", node);
}

std::vector<std::string> AutoFailoverCluster::Env() const {
  return {"HOME=" + dir_, "XDG_CONFIG_HOME=" + dir_ + "/config",
          "XDG_DATA_HOME=" + dir_ + "/state", "XDG_RUNTIME_DIR=" + dir_};
}

absl::StatusOr<std::string> AutoFailoverCluster::Autoctl(
    std::vector<std::string> args) const {
  args.insert(args.begin(), "pg_autoctl");
  return programs_.Output(std::move(args), Env());
}

absl::Status AutoFailoverCluster::SpawnKeeper(int node, std::vector<std::string> args) {
  args.insert(args.begin(), "pg_autoctl");
  ASSIGN_OR_RETURN(nodes_[node].keeper,
                   programs_.Spawn(std::move(args), Env(),
                                   absl::StrCat(dir_, "/node", node, ".log")));
  return absl::OkStatus();
}

absl::Status AutoFailoverCluster::Start(int node) {
  if (nodes_[node].keeper > 0) {
    return absl::FailedPreconditionError(absl::StrCat("node", node, " runs already"));
  }
  return SpawnKeeper(node, {"run", "--pgdata", DataDir(node)});
}

absl::Status AutoFailoverCluster::KillKeeper(int node) {
  const pid_t keeper = nodes_[node].keeper;
  if (keeper <= 0) return absl::OkStatus();
  ::killpg(keeper, SIGKILL);
  ::waitpid(keeper, nullptr, 0);
  nodes_[node].keeper = -1;
  return absl::OkStatus();
}

absl::Status AutoFailoverCluster::Kill(int node) {
  if (nodes_[node].keeper <= 0) {
    return absl::FailedPreconditionError(absl::StrCat("node", node, " is down"));
  }
  // The server runs in the keeper's process group: one signal ends both.
  return KillKeeper(node);
}

absl::Status AutoFailoverCluster::StopImmediately(int node) {
  if (nodes_[node].keeper <= 0) {
    return absl::FailedPreconditionError(absl::StrCat("node", node, " is down"));
  }
  // The keeper stops its server in immediate mode (no shutdown checkpoint;
  // stopped alone, the keeper would restart it) and exits.
  RETURN_IF_ERROR(Autoctl({"stop", "--pgdata", DataDir(node), "--immediate"}).status());
  const pid_t keeper = nodes_[node].keeper;
  for (const absl::Time deadline = absl::Now() + absl::Seconds(30);;) {
    if (::waitpid(keeper, nullptr, WNOHANG) == keeper) {
      ::killpg(keeper, SIGKILL);  // anything of it left
      nodes_[node].keeper = -1;
      return absl::OkStatus();
    }
    if (absl::Now() > deadline) {
      RETURN_IF_ERROR(KillKeeper(node));
      return absl::DeadlineExceededError(
          absl::StrCat("node", node, "'s keeper did not stop within 30 s"));
    }
    absl::SleepFor(absl::Milliseconds(20));
  }
}

pgtest::Session& AutoFailoverCluster::MonitorSession() const {
  if (monitor_session_ == nullptr) {
    monitor_session_ = std::make_unique<pgtest::Session>(monitor_url("pg_auto_failover"));
  }
  return *monitor_session_;
}

std::string AutoFailoverCluster::StateOf(int node) const {
  absl::MutexLock lock(&monitor_mu_);
  return MonitorSession()
      .QueryScalar(
             absl::StrCat("SELECT reportedstate || '/' || goalstate FROM "
                          "pgautofailover.node WHERE nodename = 'node",
                          node, "'"))
      .value_or("");
}

absl::Status AutoFailoverCluster::AwaitState(int node, absl::string_view state,
                                             absl::Duration timeout) const {
  const std::string want = absl::StrCat(state, "/", state);
  for (const absl::Time deadline = absl::Now() + timeout;;) {
    if (StateOf(node) == want) return absl::OkStatus();
    if (absl::Now() > deadline) {
      return absl::DeadlineExceededError(absl::StrCat(
          "node", node, " is not ", state, " after ", absl::FormatDuration(timeout),
          ": ", Describe()));
    }
    absl::SleepFor(absl::Milliseconds(100));
  }
}

absl::Status AutoFailoverCluster::AwaitPrimary(int node, absl::Duration timeout) const {
  for (const absl::Time deadline = absl::Now() + timeout;;) {
    const std::string s = StateOf(node);
    if (s == "primary/primary" || s == "wait_primary/wait_primary" ||
        s == "single/single") {
      return absl::OkStatus();
    }
    if (absl::Now() > deadline) {
      return absl::DeadlineExceededError(absl::StrCat(
          "node", node, " is not the primary after ", absl::FormatDuration(timeout),
          ": ", Describe()));
    }
    absl::SleepFor(absl::Milliseconds(100));
  }
}

std::string AutoFailoverCluster::Describe() const {
  absl::MutexLock lock(&monitor_mu_);
  return MonitorSession()
      .QueryScalar(
             "SELECT string_agg(nodename || ' ' || reportedstate || '/' || "
             "goalstate, ', ' ORDER BY nodeid) FROM pgautofailover.node")
      .value_or("(the monitor does not answer)");
}

}  // namespace metrics::test_util
