// metrics-agent: samples this host's system metrics every --interval and
// streams them to metricsd for one trial, through the client library's
// Reporter (buffered, batched, resent across reconnects). Stops on SIGINT
// or SIGTERM after sending what it holds, or when the trial ends.
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/status/statusor.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "client/host_inventory.h"
#include "client/nvml.h"
#include "client/reporter.h"
#include "client/sample_report.h"
#include "client/system_sampler.h"
#include "common/command_line.h"
#include "common/logging.h"
#include "common/stop_signals.h"
#include "common/tls_files.h"

ABSL_FLAG(std::string, server, "127.0.0.1:8081",
          "gRPC address (host:port) of metricsd.");
ABSL_FLAG(int32_t, trial_id, 0, "The trial to report for (required).");
ABSL_FLAG(std::string, agent_id, "",
          "Name of this host in the metrics; default: the host name.");
ABSL_FLAG(absl::Duration, interval, absl::Seconds(1),
          "Time between samples, for example 1s or 500ms.");
ABSL_FLAG(std::string, nvml_library, "libnvidia-ml.so.1",
          "NVML library to load for GPU metrics; when it cannot be loaded "
          "the agent reports no GPU series.");
ABSL_FLAG(std::string, proc_root, "/proc", "Where proc(5) is mounted.");
ABSL_FLAG(int32_t, pid, 0,
          "The job's main process: also report what it and its descendants "
          "use (process_cpu_util, process_memory_rss, process_gpu_memory per "
          "GPU). 0: none.");
ABSL_FLAG(std::string, cgroup, "",
          "The job's cgroup (for example /slurm/uid_1000/job_42, or \"self\" "
          "for the agent's own): also report its CPU use as a share of the "
          "CPUs it may use (cgroup_cpu_util), its memory use and limit, and, "
          "without --pid, its processes' use. Empty: none.");
ABSL_FLAG(std::string, cgroup_root, "/sys/fs/cgroup",
          "Where the cgroup filesystem is mounted (v2, or v1's hierarchies).");
ABSL_FLAG(int64_t, buffer_samples, 200000,
          "Samples held while the server is unreachable; beyond it the "
          "oldest are dropped (and counted).");
ABSL_FLAG(absl::Duration, shutdown_timeout, absl::Seconds(10),
          "On stop, how long to keep trying to send what is buffered.");
ABSL_FLAG(std::string, token_file, "",
          "A file holding the API token to send (a reporter token of the "
          "trial: metricsctl tokens create --role=reporter --trial=ID). "
          "Default: $METRICS_TOKEN, else none. The token is never printed.");
ABSL_FLAG(bool, tls, false,
          "Connect over TLS, trusting the system's CA roots (or --tls-ca). "
          "Implied by --tls-ca and --tls-cert.");
ABSL_FLAG(std::string, tls_ca, "",
          "Trust these CA certificates (PEM) for the server's certificate "
          "instead of the system's roots; implies --tls.");
ABSL_FLAG(std::string, tls_cert, "",
          "Present this client certificate (PEM) for mutual TLS (metricsd "
          "--tls-client-ca); needs --tls-key; implies --tls.");
ABSL_FLAG(std::string, tls_key, "", "The private key (PEM) of --tls-cert.");
ABSL_FLAG(bool, once, false,
          "Take one sample (--interval after a first reading, for the "
          "rates), print it on stdout and exit: what the agent would send "
          "from this host, with no server or --trial-id needed.");
ABSL_FLAG(bool, json, false,
          "With --once: print the sample as one JSON object (its series "
          "with units and GPU index and UUID, the inventory, each GPU's "
          "compute processes, notes and errors) instead of lines of text.");

namespace {

using metrics::common::LogError;
using metrics::common::LogInfo;
using metrics::common::LogWarning;
using SteadyClock = std::chrono::steady_clock;

// The API token: --token-file's content, else $METRICS_TOKEN, else "".
// Errors name the file, never its content.
absl::StatusOr<std::string> Token() {
  const std::string path = absl::GetFlag(FLAGS_token_file);
  if (path.empty()) {
    const char* env = std::getenv("METRICS_TOKEN");
    return std::string(absl::StripAsciiWhitespace(env == nullptr ? "" : env));
  }
  std::ifstream file(path);
  if (!file) {
    return absl::NotFoundError(absl::StrCat("--token-file ", path, ": ",
                                            std::strerror(errno)));
  }
  std::stringstream content;
  content << file.rdbuf();
  std::string token(absl::StripAsciiWhitespace(content.str()));
  if (token.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--token-file ", path, ": the file is empty"));
  }
  return token;
}

std::string HostName() {
  char name[256] = {};
  if (gethostname(name, sizeof name - 1) != 0) return "unknown-host";
  return name;
}

std::string Summary(const metrics::client::ReporterStats& s) {
  return absl::StrCat(s.recorded, " samples recorded, ", s.acknowledged,
                      " acknowledged, ", s.rejected, " rejected, ", s.dropped,
                      " dropped, ", s.unsent, " unsent; ", s.connections,
                      " connection(s), ", s.retried, " samples resent");
}

// --once: waits one interval for the rates, then prints one sample.
int PrintOneSample(metrics::client::SystemSampler& sampler,
                   const metrics::v1::AgentInventory& inventory,
                   absl::Duration interval) {
  absl::SleepFor(interval);
  const metrics::client::Sample sample = sampler.Take(SteadyClock::now());
  metrics::client::SampleReport report;
  report.sample = &sample;
  report.inventory = &inventory;
  report.interval_seconds = absl::ToDoubleSeconds(interval);
  if (sampler.nvml() != nullptr) report.processes = sampler.nvml()->ComputeProcesses();
  std::cout << (absl::GetFlag(FLAGS_json) ? metrics::client::SampleJson(report)
                                          : metrics::client::SampleText(report))
            << std::flush;
  return std::cout ? 0 : 1;
}

int Run() {
  // Before any thread starts, so that only the sigwait below sees them.
  const sigset_t stop_signals = metrics::common::BlockStopSignals();

  const int32_t trial_id = absl::GetFlag(FLAGS_trial_id);
  const absl::Duration interval = absl::GetFlag(FLAGS_interval);
  const bool once = absl::GetFlag(FLAGS_once);
  if (absl::GetFlag(FLAGS_json) && !once) {
    std::cerr << "metrics-agent: --json: only with --once\n";
    return 2;
  }
  if (trial_id <= 0 && !once) {
    std::cerr << "metrics-agent: --trial-id: required, a positive trial id\n";
    return 2;
  }
  if (interval <= absl::ZeroDuration()) {
    std::cerr << "metrics-agent: --interval: must be positive\n";
    return 2;
  }

  metrics::client::SamplerOptions sampler_options;
  sampler_options.proc_root = absl::GetFlag(FLAGS_proc_root);
  if (absl::GetFlag(FLAGS_pid) > 0 || !absl::GetFlag(FLAGS_cgroup).empty()) {
    metrics::client::JobOptions job;
    job.pid = absl::GetFlag(FLAGS_pid);
    job.cgroup = absl::GetFlag(FLAGS_cgroup);
    job.cgroup_root = absl::GetFlag(FLAGS_cgroup_root);
    job.proc_root = sampler_options.proc_root;
    sampler_options.job = std::move(job);
  }
  std::string agent_id = absl::GetFlag(FLAGS_agent_id);
  if (agent_id.empty()) agent_id = HostName();
  metrics::v1::AgentInventory inventory = metrics::client::HostInventory(
      sampler_options.proc_root, HostName(),
      absl::StrCat("metrics-agent ", METRICS_VERSION));
  absl::StatusOr<std::unique_ptr<metrics::client::Nvml>> nvml =
      metrics::client::Nvml::Load(absl::GetFlag(FLAGS_nvml_library));
  if (nvml.ok()) {
    (*nvml)->Describe(inventory);
    sampler_options.nvml = *std::move(nvml);
  } else {
    // The page shows this sentence where the GPU charts would be.
    inventory.set_gpu_status(metrics::client::InventoryText(
        absl::StrCat("NVML not available: ", nvml.status().message())));
    LogInfo("metrics-agent: no GPU metrics: NVML is not available (",
            nvml.status().message(), ")");
  }
  absl::StatusOr<std::unique_ptr<metrics::client::SystemSampler>> sampler =
      metrics::client::SystemSampler::Create(std::move(sampler_options),
                                             SteadyClock::now());
  if (!sampler.ok()) {
    std::cerr << "metrics-agent: " << sampler.status().message() << "\n";
    // No /proc is the host's fault; a job that does not exist, the flags'.
    return sampler.status().code() == absl::StatusCode::kFailedPrecondition ? 1 : 2;
  }
  if (once) return PrintOneSample(**sampler, inventory, interval);

  metrics::client::ReporterOptions options;
  options.server_address = absl::GetFlag(FLAGS_server);
  options.trial_id = trial_id;
  options.agent_id = agent_id;
  options.inventory = std::move(inventory);
  options.buffer_samples = absl::GetFlag(FLAGS_buffer_samples);
  absl::StatusOr<std::string> token = Token();
  if (!token.ok()) {
    std::cerr << "metrics-agent: " << token.status().message() << "\n";
    return 2;
  }
  options.token = *std::move(token);
  const metrics::common::ClientTlsFiles tls{absl::GetFlag(FLAGS_tls_ca),
                                            absl::GetFlag(FLAGS_tls_cert),
                                            absl::GetFlag(FLAGS_tls_key)};
  if (absl::GetFlag(FLAGS_tls) || !tls.ca.empty() || !tls.cert.empty() ||
      !tls.key.empty()) {
    absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> credentials =
        metrics::common::GrpcChannelCredentials(tls);
    if (!credentials.ok()) {
      std::cerr << "metrics-agent: " << credentials.status().message() << "\n";
      return 2;
    }
    options.credentials = *std::move(credentials);
  }
  options.overflow = metrics::client::OverflowPolicy::kDropOldest;
  // Samples come one report per interval: a batch a second at most, so a
  // live chart lags by about one interval.
  options.max_batch_age = std::min(interval, absl::Seconds(1));
  options.on_event = [](absl::string_view event) {
    LogInfo("metrics-agent: ", event);
  };
  absl::StatusOr<std::unique_ptr<metrics::client::Reporter>> reporter =
      metrics::client::Reporter::Create(options);
  if (!reporter.ok()) {
    std::cerr << "metrics-agent: " << reporter.status().message() << "\n";
    return 2;
  }
  LogInfo("metrics-agent: reporting trial ", trial_id, " as agent ",
          options.agent_id, " to ", options.server_address,
          options.credentials ? " (TLS)" : "", " every ",
          absl::FormatDuration(interval), " with ", (*sampler)->gpu_count(),
          " GPU(s)");

  absl::Notification stop;
  std::thread([&stop, stop_signals] {
    const int signal_number = metrics::common::WaitForStopSignal(stop_signals);
    LogInfo("metrics-agent: received ", strsignal(signal_number),
            ", sending what is left");
    stop.Notify();
  }).detach();  // it may wait forever if the trial ends first

  int exit_code = 0;
  bool trial_ended = false;
  absl::flat_hash_set<std::string> reported_errors;
  const auto step = std::chrono::nanoseconds(absl::ToInt64Nanoseconds(interval));
  SteadyClock::time_point next = SteadyClock::now() + step;
  while (!stop.WaitForNotificationWithTimeout(
      absl::FromChrono(next - SteadyClock::now()))) {
    const SteadyClock::time_point now = SteadyClock::now();
    metrics::client::Sample sample = (*sampler)->Take(now);
    for (const absl::Status& e : sample.errors) {
      // Once per distinct error, not every second.
      if (reported_errors.insert(std::string(e.message())).second) {
        LogWarning("metrics-agent: ", e.message());
      }
    }
    absl::Status recorded = (*reporter)->Record(absl::Now(), sample.measurements);
    if (recorded.code() == absl::StatusCode::kFailedPrecondition) {
      LogInfo("metrics-agent: stopping: ", recorded.message());
      trial_ended = true;
      break;
    }
    if (!recorded.ok() &&
        recorded.code() != absl::StatusCode::kResourceExhausted) {
      LogError("metrics-agent: stopping: ", recorded.ToString());
      exit_code = 1;
      break;
    }
    // After a stall (a suspended host), go on from now instead of catching
    // up with a burst of samples.
    next += step;
    if (next < now) next = now + step;
  }
  absl::Status shutdown = (*reporter)->Shutdown(
      absl::Now() + absl::GetFlag(FLAGS_shutdown_timeout));
  const metrics::client::ReporterStats stats = (*reporter)->stats();
  if (!shutdown.ok() && stats.unsent > 0) {
    LogError("metrics-agent: ", shutdown.message());
    // Samples taken after the trial ended have nowhere to go: expected.
    if (!trial_ended) exit_code = 1;
  }
  LogInfo("metrics-agent: stopped: ", Summary(stats));
  return exit_code;
}

}  // namespace

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "samples this host's system metrics and streams them to metricsd.\n\n"
      "Usage: metrics-agent --trial-id N [--server HOST:PORT] "
      "[--agent-id NAME] [--interval 1s] [--pid PID] [--cgroup PATH]\n"
      "       metrics-agent --once [--json] [--pid PID] [--cgroup PATH]\n\n"
      "Every --interval it records CPU utilisation (/proc/stat), available "
      "memory (/proc/meminfo), disk IOPS and read/write bytes/s of whole "
      "disks (/proc/diskstats), network bytes/s sent and received without "
      "loopback (/proc/net/dev) and, when NVML loads, each GPU's "
      "utilisation, memory, power, temperature, clocks, PCIe, ECC and "
      "throttling (and each MIG device's memory). With --pid or --cgroup it "
      "also reports the job's own share: its processes' CPU, resident and "
      "GPU memory, and its cgroup's CPU use of what it may use and its "
      "memory. Samples are buffered and resent across "
      "server restarts, so none is lost or stored twice. Stops on SIGINT or "
      "SIGTERM after sending what it holds (up to --shutdown-timeout), or "
      "when the trial ends.\n\n"
      "With --once it prints one sample instead (--json: as JSON) and "
      "exits; docs/clients.md shows the output.\n\n"
      "Exit status: 0 when stopped and everything was sent (or the trial "
      "ended; with --once, the sample printed), 1 when samples could not be "
      "sent or the server refused the trial (with --once, when this host "
      "cannot be sampled), 2 for bad flags.");
  metrics::common::ListFlagsInHelp("client/agent_main.cc");
  std::vector<char*> args = metrics::common::DashedFlagsToUnderscores(argc, argv);
  absl::ParseCommandLine(static_cast<int>(args.size()), args.data());
  return Run();
}
