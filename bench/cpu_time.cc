#include "bench/cpu_time.h"

#include <sys/resource.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace metrics::bench {
namespace {

// The fields of /proc/<pid>/stat after the command name (which may hold
// spaces; it ends at the last ')'): [0] is field 3 (state), [1] the parent,
// [11]..[14] utime, stime, cutime, cstime in clock ticks. Empty when the
// process is gone.
std::vector<std::string> StatFields(pid_t pid) {
  std::ifstream in(absl::StrCat("/proc/", pid, "/stat"));
  std::stringstream text;
  text << in.rdbuf();
  const std::string stat = text.str();
  const size_t name_end = stat.rfind(')');
  if (name_end == std::string::npos) return {};
  return absl::StrSplit(stat.substr(name_end + 2), ' ', absl::SkipEmpty());
}

double TicksToSeconds(const std::vector<std::string>& fields) {
  if (fields.size() < 15) return 0;
  double ticks = 0;
  for (size_t i = 11; i <= 14; ++i) {
    int64_t n = 0;
    if (absl::SimpleAtoi(fields[i], &n)) ticks += n;
  }
  return ticks / static_cast<double>(::sysconf(_SC_CLK_TCK));
}

// User and system time getrusage reports for `who`.
double RusageCpuSeconds(int who) {
  rusage usage{};
  ::getrusage(who, &usage);
  auto seconds = [](const timeval& t) { return t.tv_sec + t.tv_usec / 1e6; };
  return seconds(usage.ru_utime) + seconds(usage.ru_stime);
}

}  // namespace

double ProcessCpuSeconds(pid_t pid) { return TicksToSeconds(StatFields(pid)); }

double ProcessTreeCpuSeconds(pid_t root) {
  double seconds = ProcessCpuSeconds(root);
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator("/proc", error)) {
    pid_t pid = 0;
    if (!absl::SimpleAtoi(entry.path().filename().string(), &pid)) continue;
    const std::vector<std::string> fields = StatFields(pid);
    pid_t parent = 0;
    if (fields.size() > 1 && absl::SimpleAtoi(fields[1], &parent) &&
        parent == root) {
      seconds += TicksToSeconds(fields);
    }
  }
  return seconds;
}

double SelfCpuSeconds() { return RusageCpuSeconds(RUSAGE_SELF); }

double ChildrenCpuSeconds() { return RusageCpuSeconds(RUSAGE_CHILDREN); }

pid_t PostmasterPid(const std::string& data_directory) {
  std::ifstream file(data_directory + "/postmaster.pid");
  pid_t pid = 0;
  if (!(file >> pid)) return 0;
  return pid;
}

}  // namespace metrics::bench
