// cpp_reporter: the C++ Reporter driven from a command line, for the tests
// and the benchmark of the Python client (client/python/tests,
// bench/python_client.sh). Records --instants instants of --series values
// each on one stream, numbered from --first: instant i has time
// --base_us + i * 1000 and every value equal to i, so a test can check in
// SQL which instants arrived and that none came twice. Then flushes, shuts
// down and prints one JSON line: the reporter's counters and the CPU time
// Record took on the calling thread, per value.
//
// Exit status: 0 when every value was acknowledged, 1 otherwise.
//
// Thread-safety: a program.
#include <time.h>

#include <cstdint>
#include <iostream>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "client/reporter.h"

ABSL_FLAG(std::string, server, "127.0.0.1:8081", "gRPC address of metricsd.");
ABSL_FLAG(int32_t, trial_id, 0, "The trial to report for.");
ABSL_FLAG(std::string, agent_id, "cpp-reporter", "Agent of the values.");
ABSL_FLAG(std::string, stream_id, "", "Stream id; empty for a new one.");
ABSL_FLAG(std::string, token, "", "API token.");
ABSL_FLAG(bool, resume_stream, false, "Continue --stream_id (resume_stream).");
ABSL_FLAG(int64_t, first, 0, "Number of the first instant.");
ABSL_FLAG(int64_t, instants, 100, "Instants to record.");
ABSL_FLAG(int32_t, series, 25, "Values per instant (series s0, s1, ...).");
ABSL_FLAG(int64_t, base_us, 0, "Time of instant 0 (default: now).");
ABSL_FLAG(int32_t, timeout_s, 30, "How long to wait for acknowledgements.");

namespace {

int64_t ThreadCpuNanos() {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return int64_t{t.tv_sec} * 1000000000 + t.tv_nsec;
}

}  // namespace

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  metrics::client::ReporterOptions options;
  options.server_address = absl::GetFlag(FLAGS_server);
  options.trial_id = absl::GetFlag(FLAGS_trial_id);
  options.agent_id = absl::GetFlag(FLAGS_agent_id);
  options.stream_id = absl::GetFlag(FLAGS_stream_id);
  options.token = absl::GetFlag(FLAGS_token);
  options.resume_stream = absl::GetFlag(FLAGS_resume_stream);
  options.buffer_samples = 10000000;
  auto reporter = metrics::client::Reporter::Create(options);
  if (!reporter.ok()) {
    std::cerr << reporter.status() << "\n";
    return 2;
  }
  const int series = absl::GetFlag(FLAGS_series);
  std::vector<std::string> names;
  for (int s = 0; s < series; ++s) names.push_back(absl::StrCat("s", s));
  const int64_t base_us = absl::GetFlag(FLAGS_base_us) != 0
                              ? absl::GetFlag(FLAGS_base_us)
                              : absl::ToUnixMicros(absl::Now());
  const int64_t first = absl::GetFlag(FLAGS_first);
  std::vector<metrics::client::Measurement> values(series);
  int64_t cpu_ns = 0;
  for (int64_t i = first; i < first + absl::GetFlag(FLAGS_instants); ++i) {
    for (int s = 0; s < series; ++s) {
      values[s] = {names[s], static_cast<double>(i), "count"};
    }
    const int64_t before = ThreadCpuNanos();
    absl::Status recorded = (*reporter)->Record(
        absl::FromUnixMicros(base_us + i * 1000), values);
    cpu_ns += ThreadCpuNanos() - before;
    if (!recorded.ok()) {
      std::cerr << recorded << "\n";
      return 1;
    }
  }
  const absl::Status shutdown = (*reporter)->Shutdown(
      absl::Now() + absl::Seconds(absl::GetFlag(FLAGS_timeout_s)));
  const metrics::client::ReporterStats s = (*reporter)->stats();
  std::cout << "{\"stream_id\":\"" << (*reporter)->stream_id()
            << "\",\"recorded\":" << s.recorded
            << ",\"acknowledged\":" << s.acknowledged
            << ",\"unsent\":" << s.unsent
            << ",\"record_cpu_ns_per_value\":"
            << (s.recorded > 0 ? static_cast<double>(cpu_ns) / s.recorded : 0)
            << "}" << std::endl;
  if (!shutdown.ok()) std::cerr << shutdown << "\n";
  return shutdown.ok() && s.acknowledged == s.recorded ? 0 : 1;
}
