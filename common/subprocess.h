// Runs a program as a child process, capturing its standard output and
// error: tests and benchmarks run the real binaries (metricsctl, metricsd)
// this way, as an operator does, and tools/gpu_check runs the agent and
// nvidia-smi.
//
// Usage:
//   ASSERT_OK_AND_ASSIGN(auto p, Subprocess::Start({METRICSCTL_PATH, "migrate", "up"}));
//   ASSERT_OK_AND_ASSIGN(int code, p->Wait(absl::Seconds(30)));
//
// Thread-safety: thread-compatible.
#ifndef METRICS_COMMON_SUBPROCESS_H_
#define METRICS_COMMON_SUBPROCESS_H_

#include <sys/types.h>

#include <memory>
#include <optional>
#include <string>
#include "absl/strings/string_view.h"
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace metrics::common {

class Subprocess {
 public:
  // Starts argv[0] (looked up in PATH when it has no slash) with the given
  // arguments; `env` entries ("NAME=value")
  // are added to (or override) this process's environment.
  static absl::StatusOr<std::unique_ptr<Subprocess>> Start(
      std::vector<std::string> argv, std::vector<std::string> env = {});
  // Kills the child with SIGKILL if it still runs.
  ~Subprocess();

  Subprocess(const Subprocess&) = delete;
  Subprocess& operator=(const Subprocess&) = delete;

  // Reads output until a line of stdout or stderr contains `needle`, and
  // returns that line. DEADLINE_EXCEEDED on timeout, FAILED_PRECONDITION if
  // the child exits first; both name what the child printed.
  absl::StatusOr<std::string> WaitForLine(absl::string_view needle,
                                          absl::Duration timeout);

  // Waits for the child to exit, collecting its output, and returns its exit
  // code (128 + signal number if a signal ended it). DEADLINE_EXCEEDED on
  // timeout.
  absl::StatusOr<int> Wait(absl::Duration timeout);

  void Signal(int signal);

  pid_t pid() const { return pid_; }
  // A number field of the child's /proc/<pid>/status, such as "VmRSS:" (in
  // kB) or "Threads:"; 0 when absent (for benchmarks sampling the server).
  int64_t StatusField(absl::string_view field) const;
  double RssMb() const { return StatusField("VmRSS:") / 1024.0; }
  const std::string& stdout_text() const { return out_; }
  const std::string& stderr_text() const { return err_; }

 private:
  Subprocess(pid_t pid, int out_fd, int err_fd)
      : pid_(pid), out_fd_(out_fd), err_fd_(err_fd) {}

  // Reads what is available within `timeout`; false when both pipes closed.
  bool Pump(absl::Duration timeout);

  pid_t pid_;
  int out_fd_;
  int err_fd_;
  std::string out_;
  std::string err_;
  std::optional<int> exit_code_;
};

}  // namespace metrics::common

#endif  // METRICS_COMMON_SUBPROCESS_H_
