#include "common/subprocess.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"

extern char** environ;

namespace metrics::common {

absl::StatusOr<std::unique_ptr<Subprocess>> Subprocess::Start(
    std::vector<std::string> argv, std::vector<std::string> env) {
  int out[2], err[2];
  if (::pipe2(out, O_CLOEXEC) != 0 || ::pipe2(err, O_CLOEXEC) != 0) {
    return absl::InternalError(absl::StrCat("pipe: ", std::strerror(errno)));
  }
  // Build argv and envp before fork: the child may only call
  // async-signal-safe functions.
  std::vector<char*> args;
  for (std::string& a : argv) args.push_back(a.data());
  args.push_back(nullptr);
  std::vector<std::string> env_strings;
  for (char** e = environ; *e != nullptr; ++e) {
    absl::string_view entry(*e);
    bool overridden = false;
    for (const std::string& add : env) {
      const absl::string_view name =
          absl::string_view(add).substr(0, add.find('=') + 1);
      overridden |= entry.substr(0, name.size()) == name;
    }
    if (!overridden) env_strings.emplace_back(entry);
  }
  for (std::string& add : env) env_strings.push_back(add);
  std::vector<char*> envp;
  for (std::string& e : env_strings) envp.push_back(e.data());
  envp.push_back(nullptr);

  const pid_t pid = ::fork();
  if (pid < 0) {
    return absl::InternalError(absl::StrCat("fork: ", std::strerror(errno)));
  }
  if (pid == 0) {
    ::dup2(out[1], STDOUT_FILENO);
    ::dup2(err[1], STDERR_FILENO);
    ::execvpe(args[0], args.data(), envp.data());  // PATH for "openssl"
    ::_exit(127);
  }
  ::close(out[1]);
  ::close(err[1]);
  return std::unique_ptr<Subprocess>(new Subprocess(pid, out[0], err[0]));
}

Subprocess::~Subprocess() {
  if (!exit_code_.has_value()) {
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
  }
  if (out_fd_ >= 0) ::close(out_fd_);
  if (err_fd_ >= 0) ::close(err_fd_);
}

void Subprocess::Signal(int signal) { ::kill(pid_, signal); }

bool Subprocess::Pump(absl::Duration timeout) {
  pollfd fds[2] = {{out_fd_, POLLIN, 0}, {err_fd_, POLLIN, 0}};
  if (out_fd_ < 0 && err_fd_ < 0) return false;
  const int ready = ::poll(fds, 2, absl::ToInt64Milliseconds(timeout));
  if (ready <= 0) return true;
  int* fd_of[2] = {&out_fd_, &err_fd_};
  std::string* text_of[2] = {&out_, &err_};
  for (int i = 0; i < 2; ++i) {
    if (fds[i].fd < 0 || fds[i].revents == 0) continue;
    char buffer[4096];
    const ssize_t n = ::read(fds[i].fd, buffer, sizeof(buffer));
    if (n > 0) {
      text_of[i]->append(buffer, n);
    } else if (n == 0 || errno != EINTR) {
      ::close(*fd_of[i]);
      *fd_of[i] = -1;
    }
  }
  return out_fd_ >= 0 || err_fd_ >= 0;
}

absl::StatusOr<std::string> Subprocess::WaitForLine(absl::string_view needle,
                                                    absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  while (true) {
    for (const std::string* text : {&out_, &err_}) {
      for (absl::string_view line : absl::StrSplit(*text, '\n')) {
        if (line.find(needle) != absl::string_view::npos) {
          return std::string(line);
        }
      }
    }
    const absl::Duration left = deadline - absl::Now();
    if (left <= absl::ZeroDuration()) {
      return absl::DeadlineExceededError(
          absl::StrCat("no line with \"", needle, "\" within ",
                       absl::FormatDuration(timeout), "; stdout: ", out_,
                       "; stderr: ", err_));
    }
    if (!Pump(std::min(left, absl::Milliseconds(100)))) {
      return absl::FailedPreconditionError(
          absl::StrCat("exited before printing \"", needle, "\"; stdout: ",
                       out_, "; stderr: ", err_));
    }
  }
}

absl::StatusOr<int> Subprocess::Wait(absl::Duration timeout) {
  if (exit_code_.has_value()) return *exit_code_;
  const absl::Time deadline = absl::Now() + timeout;
  while (Pump(std::min(deadline - absl::Now(), absl::Milliseconds(100)))) {
    if (absl::Now() >= deadline) break;
  }
  while (true) {
    int status = 0;
    const pid_t done = ::waitpid(pid_, &status, WNOHANG);
    if (done == pid_) {
      exit_code_ = WIFEXITED(status) ? WEXITSTATUS(status)
                                     : 128 + WTERMSIG(status);
      return *exit_code_;
    }
    if (absl::Now() >= deadline) {
      return absl::DeadlineExceededError(
          absl::StrCat("still running after ", absl::FormatDuration(timeout),
                       "; stdout: ", out_, "; stderr: ", err_));
    }
    absl::SleepFor(absl::Milliseconds(10));
  }
}

int64_t Subprocess::StatusField(absl::string_view field) const {
  std::ifstream status(absl::StrCat("/proc/", pid_, "/status"));
  std::string line;
  while (std::getline(status, line)) {
    if (!absl::StartsWith(line, field)) continue;
    std::vector<std::string> parts =
        absl::StrSplit(line, absl::ByAnyChar(" \t"), absl::SkipEmpty());
    int64_t n = 0;
    if (parts.size() >= 2 && absl::SimpleAtoi(parts[1], &n)) return n;
  }
  return 0;
}

}  // namespace metrics::common
