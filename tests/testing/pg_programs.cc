#include "tests/testing/pg_programs.h"

#include <fcntl.h>
#include <pwd.h>
#include <stdlib.h>
#include <unistd.h>

#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "common/status_macros.h"
#include "common/subprocess.h"

namespace metrics::test_util {

using ::metrics::common::Subprocess;
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

std::vector<std::string> PgPrograms::AsUser(
    std::vector<std::string> argv, const std::vector<std::string>& env) const {
  std::vector<std::string> full;
  if (as_postgres_) full = {"runuser", "-u", "postgres", "--"};
  full.push_back("env");
  full.push_back(absl::StrCat("PATH=", bindir_, ":/usr/bin:/bin"));
  full.insert(full.end(), env.begin(), env.end());
  full.insert(full.end(), argv.begin(), argv.end());
  return full;
}

absl::StatusOr<std::string> PgPrograms::Output(
    std::vector<std::string> argv, const std::vector<std::string>& env) const {
  return RunForOutput(AsUser(std::move(argv), env));
}

absl::StatusOr<pid_t> PgPrograms::Spawn(std::vector<std::string> argv,
                                        const std::vector<std::string>& env,
                                        const std::string& log_path) const {
  const std::vector<std::string> full = AsUser(std::move(argv), env);
  std::vector<char*> args;
  for (const std::string& a : full) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  const int log = ::open(log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (log < 0) return absl::InternalError(absl::StrCat("cannot open ", log_path));
  const pid_t pid = ::fork();
  if (pid < 0) {
    ::close(log);
    return absl::InternalError("fork failed");
  }
  if (pid == 0) {
    ::setsid();
    ::dup2(log, 1);
    ::dup2(log, 2);
    const int null = ::open("/dev/null", O_RDONLY);
    if (null >= 0) ::dup2(null, 0);
    ::execvp(args[0], args.data());
    ::_exit(127);
  }
  ::close(log);
  return pid;
}

}  // namespace metrics::test_util
