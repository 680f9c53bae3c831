// The client's cost to the process it runs in, against a real metricsd (a
// separate process, so its CPU is not counted):
//  1. Reporter: CPU time per recorded sample, on the recording thread alone
//     and for the whole process (the Reporter's thread and gRPC's included),
//     with, as the same-run baseline, the CPU time of only building and
//     serialising the same samples as protobuf batches, which any client
//     must do.
//  2. metrics-agent: its CPU share of one core at --interval=1s with eight
//     fake GPUs (tests/fake_nvml), and, as the baseline, the same agent
//     without NVML; and with the job's share too (--pid of this process,
//     --cgroup=self), whose /proc scan is the part that grows with the host.
// Run it with bench/client.sh. The last line is JSON.
#include <grpcpp/create_channel.h>
#include <signal.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <iostream>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "client/reporter.h"
#include "common/subprocess.h"
#include "proto/metrics/v1/ingest.pb.h"
#include "tests/testing/test_database.h"
#include "tests/testing/trials.h"

ABSL_FLAG(int, reports, 40000, "Reports recorded (each 25 values).");
ABSL_FLAG(absl::Duration, agent_time, absl::Seconds(20),
          "How long each metrics-agent run lasts.");

namespace metrics::bench {
namespace {

using common::Subprocess;

constexpr int kGpus = 8;
constexpr int kValuesPerReport = 9 + 2 * kGpus;  // as in the ingest bench

double Seconds(const timeval& t) { return t.tv_sec + t.tv_usec / 1e6; }

// CPU seconds (user + system) of this process, or of its waited-for
// children.
double CpuSeconds(int who) {
  rusage usage{};
  getrusage(who, &usage);
  return Seconds(usage.ru_utime) + Seconds(usage.ru_stime);
}

double ThreadCpuSeconds() {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return t.tv_sec + t.tv_nsec / 1e9;
}

struct Series {
  std::string name;
  std::string unit;
  std::string gpu;
};

std::vector<Series> HostSeries() {
  std::vector<Series> s = {
      {"cpu_util_simple", "percent", ""},     {"memory_free", "bytes", ""},
      {"disk_iops", "operations/s", ""},      {"disk_throughput_read", "bytes/s", ""},
      {"disk_throughput_write", "bytes/s", ""}, {"net_throughput_sent", "bytes/s", ""},
      {"net_throughput_recv", "bytes/s", ""}, {"loss", "1", ""},
      {"tokens_per_second", "tokens/s", ""}};
  for (int g = 0; g < kGpus; ++g) {
    const std::string uuid = absl::StrCat("GPU-bench-", g);
    s.push_back({"gpu_util", "percent", uuid});
    s.push_back({"gpu_free_memory", "bytes", uuid});
  }
  return s;
}

// Builds and serialises the reports as batches of `per_batch` reports: the
// least work any client does for the same samples.
double BaselineCpuPerSample(const std::vector<Series>& series, int reports,
                            int per_batch) {
  const double before = CpuSeconds(RUSAGE_SELF);
  const absl::Time start = absl::Now();
  size_t bytes = 0;
  std::string wire;
  for (int first = 0; first < reports; first += per_batch) {
    v1::StreamSystemMetricsRequest request;
    v1::SystemMetricsBatch* batch = request.mutable_batch();
    batch->set_agent_id("bench-host");
    batch->set_trial_id(1);
    batch->set_sequence(first / per_batch + 1);
    for (const Series& s : series) {
      v1::SeriesDeclaration* d = batch->add_series();
      d->set_name(s.name);
      d->set_unit(s.unit);
      d->set_gpu_uuid(s.gpu);
    }
    for (int r = first; r < std::min(reports, first + per_batch); ++r) {
      v1::SystemMetricsReport* report = batch->add_reports();
      const int64_t ns = absl::ToUnixNanos(start + absl::Milliseconds(r));
      report->mutable_time()->set_seconds(ns / 1000000000);
      report->mutable_time()->set_nanos(static_cast<int32_t>(ns % 1000000000));
      for (size_t i = 0; i < series.size(); ++i) {
        report->add_series(static_cast<uint32_t>(i));
        report->add_values(r * 0.5 + i);
      }
    }
    request.SerializeToString(&wire);
    bytes += wire.size();
  }
  const double cpu = CpuSeconds(RUSAGE_SELF) - before;
  if (bytes == 0) std::cerr << "nothing serialised\n";
  return cpu / (double(reports) * series.size());
}

struct ReporterFigures {
  double record_thread_ns = 0;  // per sample, the caller's thread
  double process_ns = 0;        // per sample, the whole process
  double seconds = 0;           // from the first Record to all acknowledged
  int64_t acknowledged = 0;
};

absl::StatusOr<ReporterFigures> MeasureReporter(const std::string& target,
                                                const std::vector<Series>& series,
                                                int reports) {
  client::ReporterOptions options;
  options.server_address = target;
  options.trial_id = 1;
  options.agent_id = "bench-host";
  options.buffer_samples = int64_t{reports} * kValuesPerReport;
  absl::StatusOr<std::unique_ptr<client::Reporter>> reporter =
      client::Reporter::Create(options);
  if (!reporter.ok()) return reporter.status();
  std::vector<client::Measurement> values;
  for (const Series& s : series) values.push_back({s.name, 0, s.unit, s.gpu});
  const absl::Time t0 = absl::Now() - absl::Hours(1);

  const double process_before = CpuSeconds(RUSAGE_SELF);
  const double thread_before = ThreadCpuSeconds();
  const auto wall_before = std::chrono::steady_clock::now();
  for (int r = 0; r < reports; ++r) {
    for (size_t i = 0; i < values.size(); ++i) values[i].value = r * 0.5 + i;
    if (absl::Status s = (*reporter)->Record(t0 + absl::Milliseconds(r), values);
        !s.ok()) {
      return s;
    }
  }
  const double thread_cpu = ThreadCpuSeconds() - thread_before;
  if (absl::Status s = (*reporter)->Flush(absl::Now() + absl::Minutes(5)); !s.ok()) {
    return s;
  }
  ReporterFigures f;
  f.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() -
                                            wall_before)
                  .count();
  const double samples = double(reports) * values.size();
  f.process_ns = (CpuSeconds(RUSAGE_SELF) - process_before) / samples * 1e9;
  f.record_thread_ns = thread_cpu / samples * 1e9;
  f.acknowledged = (*reporter)->stats().acknowledged;
  return f;
}

// Runs metrics-agent for `duration` and returns its CPU share of one core;
// `with_job`: also the job's share, this benchmark's process as the job
// (--pid, and --cgroup=self where cgroups are mounted).
absl::StatusOr<double> AgentCpuShare(const std::string& target,
                                     absl::Duration duration, bool with_gpus,
                                     bool with_job = false) {
  std::vector<std::string> argv = {METRICS_AGENT_PATH, "--server=" + target,
                                   "--trial-id=1", "--interval=1s"};
  if (!with_gpus) argv.push_back("--nvml-library=/nonexistent");
  if (with_job) {
    argv.push_back(absl::StrCat("--pid=", getpid()));
    if (std::filesystem::exists("/sys/fs/cgroup")) argv.push_back("--cgroup=self");
  }
  const double children_before = CpuSeconds(RUSAGE_CHILDREN);
  const auto wall_before = std::chrono::steady_clock::now();
  absl::StatusOr<std::unique_ptr<Subprocess>> agent = Subprocess::Start(
      argv, {absl::StrCat("LD_LIBRARY_PATH=", FAKE_NVML_DIR),
             absl::StrCat("FAKE_NVML_GPU_COUNT=", kGpus),
             absl::StrCat("FAKE_NVML_PROCESSES=", getpid(), ":1024")});
  if (!agent.ok()) return agent.status();
  absl::StatusOr<std::string> line =
      (*agent)->WaitForLine("metrics-agent: reporting", absl::Seconds(30));
  if (!line.ok()) return line.status();
  absl::SleepFor(duration);
  (*agent)->Signal(SIGTERM);
  absl::StatusOr<int> code = (*agent)->Wait(absl::Seconds(30));
  if (!code.ok()) return code.status();
  if (*code != 0) {
    return absl::InternalError(absl::StrCat("metrics-agent exited with ", *code,
                                            ": ", (*agent)->stderr_text()));
  }
  const double wall = std::chrono::duration<double>(
                          std::chrono::steady_clock::now() - wall_before)
                          .count();
  return (CpuSeconds(RUSAGE_CHILDREN) - children_before) / wall;
}

int Run() {
  absl::StatusOr<std::unique_ptr<test_util::TestDatabase>> db =
      test_util::TestDatabase::Create();
  if (!db.ok()) {
    std::cerr << db.status() << "\n";
    return 1;
  }
  absl::StatusOr<std::unique_ptr<Subprocess>> metricsd = Subprocess::Start(
      {METRICSD_PATH, "--database-url=" + (*db)->url(),
       "--grpc-address=127.0.0.1:0", "--http-address=127.0.0.1:0",
       "--auth=off"});
  if (!metricsd.ok()) {
    std::cerr << metricsd.status() << "\n";
    return 1;
  }
  absl::StatusOr<std::string> line =
      (*metricsd)->WaitForLine("gRPC listening on", absl::Seconds(30));
  if (!line.ok()) {
    std::cerr << line.status() << "\n";
    return 1;
  }
  const std::string target =
      absl::StrCat("127.0.0.1:", line->substr(line->rfind(':') + 1));
  if (absl::Status s = test_util::CreateTrial(
          grpc::CreateChannel(target, grpc::InsecureChannelCredentials()), 1);
      !s.ok()) {
    std::cerr << "cannot create trial 1: " << s << "\n";
    return 1;
  }

  const int reports = absl::GetFlag(FLAGS_reports);
  const std::vector<Series> series = HostSeries();
  const int per_batch = client::ReporterOptions().max_batch_samples / kValuesPerReport;
  const double baseline_ns =
      BaselineCpuPerSample(series, reports, per_batch) * 1e9;
  absl::StatusOr<ReporterFigures> reporter = MeasureReporter(target, series, reports);
  if (!reporter.ok()) {
    std::cerr << "reporter: " << reporter.status() << "\n";
    return 1;
  }
  const absl::Duration agent_time = absl::GetFlag(FLAGS_agent_time);
  absl::StatusOr<double> agent_gpus = AgentCpuShare(target, agent_time, true);
  absl::StatusOr<double> agent_plain = AgentCpuShare(target, agent_time, false);
  absl::StatusOr<double> agent_job = AgentCpuShare(target, agent_time, true, true);
  if (!agent_gpus.ok() || !agent_plain.ok() || !agent_job.ok()) {
    std::cerr << "agent: " << agent_gpus.status() << " / " << agent_plain.status()
              << " / " << agent_job.status() << "\n";
    return 1;
  }

  const int64_t samples = int64_t{reports} * kValuesPerReport;
  std::cout << absl::StrFormat(
      "Reporter: %d reports x %d values = %d samples, all acknowledged: %s\n"
      "  recording thread                %8.0f ns CPU per sample\n"
      "  whole client process            %8.0f ns CPU per sample "
      "(Reporter thread and gRPC included; %.2f s to acknowledge all)\n"
      "  baseline: build + serialise     %8.0f ns CPU per sample\n"
      "  ratio (process / baseline)      %8.2f\n"
      "metrics-agent at 1 s, %.0f s runs:\n"
      "  with %d fake GPUs               %8.3f %% of one core\n"
      "  and the job's share (--pid)     %8.3f %% of one core\n"
      "  baseline: no NVML               %8.3f %% of one core\n"
      "  ratio (GPUs / baseline)         %8.2f\n",
      reports, kValuesPerReport, samples,
      reporter->acknowledged == samples ? "yes" : "NO",
      reporter->record_thread_ns, reporter->process_ns, reporter->seconds,
      baseline_ns, reporter->process_ns / baseline_ns,
      absl::ToDoubleSeconds(agent_time), kGpus, *agent_gpus * 100,
      *agent_job * 100, *agent_plain * 100, *agent_gpus / *agent_plain);
  std::cout << absl::StrFormat(
      "{\"record_thread_ns_per_sample\": %.1f, \"client_ns_per_sample\": %.1f, "
      "\"baseline_ns_per_sample\": %.1f, \"ratio_to_baseline\": %.3f, "
      "\"agent_8gpu_core_percent\": %.4f, \"agent_8gpu_job_core_percent\": %.4f, "
      "\"agent_no_gpu_core_percent\": %.4f}\n",
      reporter->record_thread_ns, reporter->process_ns, baseline_ns,
      reporter->process_ns / baseline_ns, *agent_gpus * 100, *agent_job * 100,
      *agent_plain * 100);
  return reporter->acknowledged == samples ? 0 : 1;
}

}  // namespace
}  // namespace metrics::bench

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  return metrics::bench::Run();
}
