// A PostgreSQL server whose WAL is archived, made for one test, and a
// point-in-time restore of it, as docs/operating.md ("Backup and restore")
// tells operators to do: initdb in a temporary folder; the server started
// with every finished WAL segment copied to <folder>/archive
// (archive_command); BaseBackup takes pg_basebackup of the live server;
// RestoreTo stops that server at once (a lost disk) and starts a new one
// on the base backup, replaying the archive up to a named restore point,
// then promoted. Both listen only on Unix sockets in the folder, which is
// removed when the object dies. PgPrograms runs the binaries.
//
// Thread-safety: thread-compatible; url() may be read while BaseBackup runs.
#ifndef METRICS_TESTS_TESTING_ARCHIVED_CLUSTER_H_
#define METRICS_TESTS_TESTING_ARCHIVED_CLUSTER_H_

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "tests/testing/pg_programs.h"

namespace metrics::test_util {

class ArchivedCluster {
 public:
  static absl::StatusOr<std::unique_ptr<ArchivedCluster>> Create();
  ~ArchivedCluster();

  ArchivedCluster(const ArchivedCluster&) = delete;
  ArchivedCluster& operator=(const ArchivedCluster&) = delete;

  // A libpq keyword string for `database` on the server running now: the
  // original until RestoreTo, the restored one after.
  std::string url(absl::string_view database) const;

  // pg_basebackup of the running server (into the folder RestoreTo starts
  // the restored server in).
  absl::Status BaseBackup() const;

  // pg_create_restore_point(name), then a switch to a new WAL segment;
  // returns once the archive holds the point's segment.
  absl::Status CreateRestorePoint(absl::string_view name) const;

  // Stops the original server (immediate: no shutdown checkpoint), starts a
  // server on the base backup that recovers from the archive up to the
  // restore point `name`, and waits until it is promoted (takes writes).
  absl::Status RestoreTo(absl::string_view name);

 private:
  ArchivedCluster(std::string dir, PgPrograms programs)
      : dir_(std::move(dir)), programs_(std::move(programs)) {}

  std::string DataDir() const;
  int Port() const;
  absl::Status Start(const std::string& settings);

  std::string dir_;
  PgPrograms programs_;
  bool restored_ = false;
  bool up_ = false;
};

}  // namespace metrics::test_util

#endif  // METRICS_TESTS_TESTING_ARCHIVED_CLUSTER_H_
