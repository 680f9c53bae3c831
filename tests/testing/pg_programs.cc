#include "tests/testing/pg_programs.h"

#include <pwd.h>
#include <stdlib.h>
#include <unistd.h>

#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "common/status_macros.h"
#include "tests/testing/subprocess.h"

namespace metrics::test_util {
namespace {

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

absl::StatusOr<PgPrograms> PgPrograms::Find() {
  PgPrograms programs;
  ASSIGN_OR_RETURN(std::string bindir, RunForOutput({"pg_config", "--bindir"}));
  programs.bindir_ = std::string(absl::StripAsciiWhitespace(bindir));
  if (::geteuid() == 0) {
    const passwd* postgres = ::getpwnam("postgres");
    if (postgres == nullptr) {
      return absl::FailedPreconditionError(
          "running as root, and there is no \"postgres\" user to run "
          "PostgreSQL as (the postgresql package makes it)");
    }
    programs.as_postgres_ = true;
    programs.uid_ = static_cast<int>(postgres->pw_uid);
    programs.gid_ = static_cast<int>(postgres->pw_gid);
  }
  return programs;
}

absl::StatusOr<std::string> PgPrograms::MakeFolder(const std::string& prefix) const {
  std::string dir = absl::StrCat("/tmp/", prefix, "-XXXXXX");
  if (::mkdtemp(dir.data()) == nullptr) {
    return absl::InternalError(absl::StrCat("mkdtemp ", dir, " failed"));
  }
  if (as_postgres_ && ::chown(dir.c_str(), uid_, gid_) != 0) {
    return absl::InternalError(absl::StrCat("chown ", dir, " failed"));
  }
  return dir;
}

absl::Status PgPrograms::Run(const std::string& program,
                             std::vector<std::string> args) const {
  std::vector<std::string> argv;
  if (as_postgres_) argv = {"runuser", "-u", "postgres", "--"};
  argv.push_back(absl::StrCat(bindir_, "/", program));
  argv.insert(argv.end(), args.begin(), args.end());
  return RunForOutput(std::move(argv)).status();
}

}  // namespace metrics::test_util
