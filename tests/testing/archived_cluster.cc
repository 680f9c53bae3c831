#include "tests/testing/archived_cluster.h"

#include <filesystem>
#include <fstream>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/status_macros.h"
#include "storage/pg/testing/pg_checks.h"

namespace metrics::test_util {
namespace {

namespace fs = std::filesystem;
namespace pgtest = ::metrics::storage::pg::test_util;

// The sockets are files in the cluster's folder, so fixed port numbers
// cannot collide with another cluster's.
constexpr int kOriginalPort = 5432;
constexpr int kRestoredPort = 5433;

}  // namespace

absl::StatusOr<std::unique_ptr<ArchivedCluster>> ArchivedCluster::Create() {
  ASSIGN_OR_RETURN(PgPrograms programs, PgPrograms::Find());
  ASSIGN_OR_RETURN(std::string folder, programs.MakeFolder("metrics-archived"));
  std::unique_ptr<ArchivedCluster> cluster(
      new ArchivedCluster(std::move(folder), std::move(programs)));
  const std::string archive = cluster->dir_ + "/archive";
  std::error_code error;
  fs::create_directory(archive, error);
  // The server's user copies segments in.
  fs::permissions(archive, fs::perms::all, error);
  if (error) return absl::InternalError(absl::StrCat("cannot make ", archive));
  RETURN_IF_ERROR(cluster->programs_.Run(
      "initdb", {"-D", cluster->DataDir(), "-U", "postgres", "-A", "trust",
                 "--no-sync", "--no-instructions"}));
  RETURN_IF_ERROR(cluster->Start(absl::StrCat(
      " -c archive_mode=on -c archive_command='cp %p ", archive, "/%f'")));
  return cluster;
}

ArchivedCluster::~ArchivedCluster() {
  if (up_) {
    (void)programs_.Run("pg_ctl", {"-D", DataDir(), "-m", "immediate", "-w", "stop"});
  }
  std::error_code ignored;
  fs::remove_all(dir_, ignored);
}

std::string ArchivedCluster::DataDir() const {
  return dir_ + (restored_ ? "/restored" : "/original");
}

int ArchivedCluster::Port() const { return restored_ ? kRestoredPort : kOriginalPort; }

std::string ArchivedCluster::url(absl::string_view database) const {
  return absl::StrCat("host=", dir_, " port=", Port(), " user=postgres dbname=", database);
}

absl::Status ArchivedCluster::Start(const std::string& settings) {
  RETURN_IF_ERROR(programs_.Run(
      "pg_ctl", {"-D", DataDir(), "-l", DataDir() + ".log", "-w", "-t", "60", "-o",
                 absl::StrCat("-c port=", Port(), " -c listen_addresses='' ",
                              "-c unix_socket_directories=", dir_, " -c fsync=off",
                              settings),
                 "start"}));
  up_ = true;
  return absl::OkStatus();
}

absl::Status ArchivedCluster::BaseBackup() const {
  // Straight into the folder the restore starts from, as the server's user.
  return programs_.Run("pg_basebackup",
                       {"-h", dir_, "-p", std::to_string(Port()), "-U", "postgres",
                        "-D", dir_ + "/restored", "-X", "stream", "-c", "fast",
                        "--no-sync"});
}

absl::Status ArchivedCluster::CreateRestorePoint(absl::string_view name) const {
  const std::string url = this->url("postgres");
  // The name is the test's own: quoting it as a literal is enough.
  RETURN_IF_ERROR(
      pgtest::QueryScalar(url, absl::StrCat("SELECT pg_create_restore_point('", name, "')"))
          .status());
  // pg_switch_wal() ends the segment holding the point; pg_walfile_name
  // names that segment for the location it returns (its end).
  ASSIGN_OR_RETURN(std::string segment,
                   pgtest::QueryScalar(url, "SELECT pg_walfile_name(pg_switch_wal())"));
  const absl::Time deadline = absl::Now() + absl::Seconds(60);
  while (true) {
    // Same timeline: the names order as the segments do.
    ASSIGN_OR_RETURN(std::string archived,
                     pgtest::QueryScalar(url, "SELECT coalesce(last_archived_wal, '') "
                                              "FROM pg_stat_archiver"));
    if (archived >= segment) return absl::OkStatus();
    if (absl::Now() > deadline) {
      return absl::DeadlineExceededError(absl::StrCat(
          "WAL segment ", segment, " not archived (the last: ", archived, ")"));
    }
    absl::SleepFor(absl::Milliseconds(50));
  }
}

absl::Status ArchivedCluster::RestoreTo(absl::string_view name) {
  if (restored_) return absl::FailedPreconditionError("already restored");
  RETURN_IF_ERROR(programs_.Run("pg_ctl", {"-D", DataDir(), "-m", "immediate", "-w", "stop"}));
  up_ = false;
  restored_ = true;
  if (!std::ofstream(DataDir() + "/recovery.signal")) {
    return absl::InternalError("cannot write recovery.signal into the base backup");
  }
  RETURN_IF_ERROR(Start(absl::StrCat(" -c restore_command='cp ", dir_, "/archive/%f %p'",
                                     " -c recovery_target_name='", name, "'",
                                     " -c recovery_target_action=promote")));
  const absl::Time deadline = absl::Now() + absl::Seconds(60);
  while (true) {
    absl::StatusOr<std::string> recovering =
        pgtest::QueryScalar(url("postgres"), "SELECT pg_is_in_recovery()");
    if (recovering.ok() && *recovering == "f") return absl::OkStatus();
    if (absl::Now() > deadline) {
      return absl::DeadlineExceededError(absl::StrCat(
          "the restored server was not promoted: ",
          recovering.ok() ? "still recovering" : recovering.status().ToString()));
    }
    absl::SleepFor(absl::Milliseconds(50));
  }
}

}  // namespace metrics::test_util
