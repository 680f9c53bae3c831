// PostgreSQL's server programs (initdb, pg_ctl, pg_basebackup: those
// `pg_config --bindir` names, and others that drive them, such as
// pg_autoctl) for test fixtures that make their own clusters. When this process is root the programs run as the "postgres"
// user, as initdb refuses root, and the fixture's folder is given to it.
//
// Thread-safety: a value; Run is safe from any thread.
#ifndef METRICS_TESTS_TESTING_PG_PROGRAMS_H_
#define METRICS_TESTS_TESTING_PG_PROGRAMS_H_

#include <sys/types.h>

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace metrics::test_util {

class PgPrograms {
 public:
  // Finds the programs. FAILED_PRECONDITION as root without a "postgres"
  // user.
  static absl::StatusOr<PgPrograms> Find();

  // A new folder under /tmp named "<prefix>-XXXXXX", owned by the user the
  // programs run as.
  absl::StatusOr<std::string> MakeFolder(const std::string& prefix) const;

  // Runs `program` of the bindir with `args`; INTERNAL with its error output
  // when it exits non-zero.
  absl::Status Run(const std::string& program, std::vector<std::string> args) const;

  // Runs `argv` (argv[0] looked up in PATH, which starts with the bindir)
  // as the user PostgreSQL runs as, with `env` ("NAME=value") added; its
  // standard output, or INTERNAL with its error output when it exits
  // non-zero.
  absl::StatusOr<std::string> Output(std::vector<std::string> argv,
                                     const std::vector<std::string>& env) const;

  // Starts `argv` the same way, in a session of its own with its output
  // appended to `log_path`, and returns its process id, which is also its
  // process group's: killpg reaches it and everything it started.
  absl::StatusOr<pid_t> Spawn(std::vector<std::string> argv,
                              const std::vector<std::string>& env,
                              const std::string& log_path) const;

  const std::string& bindir() const { return bindir_; }

 private:
  // `argv` run by `env` with PATH and `env` set, as runuser's when as root.
  std::vector<std::string> AsUser(std::vector<std::string> argv,
                                  const std::vector<std::string>& env) const;

  std::string bindir_;
  bool as_postgres_ = false;
  int uid_ = -1, gid_ = -1;  // the "postgres" user's, when as_postgres_
};

}  // namespace metrics::test_util

#endif  // METRICS_TESTS_TESTING_PG_PROGRAMS_H_
