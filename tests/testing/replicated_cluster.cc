#include "tests/testing/replicated_cluster.h"

#include <pwd.h>
#include <stdlib.h>
#include <unistd.h>

#include <filesystem>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "common/status_macros.h"
#include "storage/pg/testing/pg_checks.h"
#include "tests/testing/subprocess.h"

namespace metrics::test_util {
namespace {

// The sockets are files in the cluster's folder, so fixed port numbers
// cannot collide with another cluster's.
constexpr int kPrimaryPort = 5432;
constexpr int kStandbyPort = 5433;

absl::StatusOr<std::string> RunForOutput(std::vector<std::string> argv) {
  const std::string what = argv[0];
  ASSIGN_OR_RETURN(std::unique_ptr<Subprocess> p, Subprocess::Start(std::move(argv)));
  ASSIGN_OR_RETURN(int code, p->Wait(absl::Seconds(120)));
  if (code != 0) {
    return absl::InternalError(absl::StrCat(what, " exited with ", code, ": ",
                                            p->stderr_text()));
  }
  return p->stdout_text();
}

}  // namespace

absl::StatusOr<std::unique_ptr<ReplicatedCluster>> ReplicatedCluster::Create() {
  char dir_template[] = "/tmp/metrics-replicated-XXXXXX";
  if (::mkdtemp(dir_template) == nullptr) {
    return absl::InternalError("mkdtemp failed");
  }
  std::unique_ptr<ReplicatedCluster> cluster(new ReplicatedCluster(dir_template));
  ASSIGN_OR_RETURN(std::string bindir, RunForOutput({"pg_config", "--bindir"}));
  cluster->bindir_ = std::string(absl::StripAsciiWhitespace(bindir));
  if (::geteuid() == 0) {
    const passwd* postgres = ::getpwnam("postgres");
    if (postgres == nullptr) {
      return absl::FailedPreconditionError(
          "running as root, and there is no \"postgres\" user to run "
          "PostgreSQL as (the postgresql package makes it)");
    }
    if (::chown(dir_template, postgres->pw_uid, postgres->pw_gid) != 0) {
      return absl::InternalError(absl::StrCat("chown ", dir_template, " failed"));
    }
  }
  const std::string& dir = cluster->dir_;
  RETURN_IF_ERROR(cluster->Run(
      "initdb", {"-D", dir + "/primary", "-U", "postgres", "-A", "trust",
                 "--no-sync", "--no-instructions"}));
  RETURN_IF_ERROR(cluster->Start(Server::kPrimary));
  RETURN_IF_ERROR(cluster->Run(
      "pg_basebackup",
      {"-h", dir, "-p", std::to_string(kPrimaryPort), "-U", "postgres", "-D",
       dir + "/standby", "-R", "-X", "stream", "-c", "fast", "--no-sync"}));
  RETURN_IF_ERROR(cluster->Start(Server::kStandby));
  return cluster;
}

ReplicatedCluster::~ReplicatedCluster() {
  for (Server server : {Server::kStandby, Server::kPrimary}) {
    if (up_[static_cast<int>(server)]) {
      (void)Run("pg_ctl", {"-D", DataDir(server), "-m", "immediate", "-w", "stop"});
    }
  }
  std::error_code ignored;
  std::filesystem::remove_all(dir_, ignored);
}

std::string ReplicatedCluster::primary_url(absl::string_view database) const {
  return absl::StrCat("host=", dir_, " port=", kPrimaryPort,
                      " user=postgres dbname=", database);
}

std::string ReplicatedCluster::standby_url(absl::string_view database) const {
  return absl::StrCat("host=", dir_, " port=", kStandbyPort,
                      " user=postgres dbname=", database);
}

absl::Status ReplicatedCluster::AwaitStandbyCaughtUp(
    absl::Duration timeout) const {
  ASSIGN_OR_RETURN(std::string target,
                   storage::pg::test_util::QueryScalar(
                       primary_url("postgres"), "SELECT pg_current_wal_lsn()"));
  const absl::Time deadline = absl::Now() + timeout;
  while (true) {
    absl::StatusOr<std::string> behind = storage::pg::test_util::QueryScalar(
        standby_url("postgres"),
        absl::StrCat("SELECT pg_last_wal_replay_lsn() < '", target, "'::pg_lsn"));
    if (behind.ok() && *behind == "f") return absl::OkStatus();
    if (absl::Now() > deadline) {
      return absl::DeadlineExceededError(absl::StrCat(
          "the standby has not replayed up to ", target, " (",
          behind.ok() ? "behind" : behind.status().ToString(), ")"));
    }
    absl::SleepFor(absl::Milliseconds(20));
  }
}

std::string ReplicatedCluster::DataDir(Server server) const {
  return absl::StrCat(dir_, server == Server::kPrimary ? "/primary" : "/standby");
}

absl::Status ReplicatedCluster::Stop(Server server) {
  RETURN_IF_ERROR(Run("pg_ctl", {"-D", DataDir(server), "-m", "fast", "-w", "stop"}));
  up_[static_cast<int>(server)] = false;
  return absl::OkStatus();
}

absl::Status ReplicatedCluster::Start(Server server) {
  const int port = server == Server::kPrimary ? kPrimaryPort : kStandbyPort;
  RETURN_IF_ERROR(Run(
      "pg_ctl", {"-D", DataDir(server), "-l", DataDir(server) + ".log", "-w",
                 "-t", "60", "-o",
                 absl::StrCat("-c port=", port, " -c listen_addresses='' ",
                              "-c unix_socket_directories=", dir_,
                              " -c fsync=off"),
                 "start"}));
  up_[static_cast<int>(server)] = true;
  return absl::OkStatus();
}

absl::Status ReplicatedCluster::Run(const std::string& program,
                                    std::vector<std::string> args) const {
  std::vector<std::string> argv;
  if (::geteuid() == 0) argv = {"runuser", "-u", "postgres", "--"};
  argv.push_back(absl::StrCat(bindir_, "/", program));
  argv.insert(argv.end(), args.begin(), args.end());
  return RunForOutput(std::move(argv)).status();
}

}  // namespace metrics::test_util
