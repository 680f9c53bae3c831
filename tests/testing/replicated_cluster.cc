#include "tests/testing/replicated_cluster.h"

#include <filesystem>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/status_macros.h"
#include "storage/pg/testing/pg_checks.h"
#include "tests/testing/pg_programs.h"

namespace metrics::test_util {
namespace {

// The sockets are files in the cluster's folder, so fixed port numbers
// cannot collide with another cluster's.
constexpr int kPrimaryPort = 5432;
constexpr int kStandbyPort = 5433;

}  // namespace

absl::StatusOr<std::unique_ptr<ReplicatedCluster>> ReplicatedCluster::Create() {
  ASSIGN_OR_RETURN(PgPrograms programs, PgPrograms::Find());
  ASSIGN_OR_RETURN(std::string folder, programs.MakeFolder("metrics-replicated"));
  std::unique_ptr<ReplicatedCluster> cluster(
      new ReplicatedCluster(std::move(folder), std::move(programs)));
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
  return programs_.Run(program, std::move(args));
}

}  // namespace metrics::test_util
