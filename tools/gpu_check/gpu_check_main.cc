// gpu-check: holds the GPU readings of metrics-agent (and of the Python
// client, where a python3 is at hand) against nvidia-smi's on a machine
// with NVIDIA GPUs, and prints per signal and GPU both answers and whether
// they agree (docs/testing.md, "The GPU check"). Each client samples twice,
// before and after nvidia-smi is asked, so a reading that moves is judged
// against the range it moved in. Runs from the bundle make_bundle.sh makes,
// on a machine without this project's packages.
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/status/statusor.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/command_line.h"
#include "common/subprocess.h"
#include "tools/gpu_check/client_readings.h"
#include "tools/gpu_check/comparison.h"
#include "tools/gpu_check/nvidia_smi.h"

ABSL_FLAG(std::string, agent, "metrics-agent", "The metrics-agent to check.");
ABSL_FLAG(bool, load, false,
          "Keep every GPU busy during the check with gpu-load (holding "
          "--load-mib on each, through CUDA's libcuda.so.1), and take its "
          "process as --pid unless one is given: an idle GPU lists no "
          "compute process and reads 0 % everywhere.");
ABSL_FLAG(std::string, gpu_load, "gpu-load", "The gpu-load program, for --load.");
ABSL_FLAG(int64_t, load_mib, 1024, "With --load: MiB to hold on each GPU.");
ABSL_FLAG(std::string, cuda_library, "libcuda.so.1",
          "With --load: CUDA's driver library.");
ABSL_FLAG(std::string, loader, "",
          "Run the agent through this dynamic loader (the bundle's "
          "ld-linux), with --library-path; empty: run it directly.");
ABSL_FLAG(std::string, library_path, "",
          "The folder of the agent's shared libraries, for --loader.");
ABSL_FLAG(std::string, nvidia_smi, "nvidia-smi", "NVIDIA's nvidia-smi.");
ABSL_FLAG(std::string, nvml_library, "libnvidia-ml.so.1",
          "The NVML library the clients load.");
ABSL_FLAG(int64_t, pid, 0,
          "A process using a GPU (a training job): the clients also report "
          "its process_gpu_memory, held against nvidia-smi's. 0: none.");
ABSL_FLAG(std::string, python, "python3",
          "The Python 3 (3.9 or later, standard library only) to check the "
          "Python client with; empty: do not.");
ABSL_FLAG(std::string, python_readings, "",
          "python_readings.py, which prints the Python client's readings; "
          "empty: the Python client is not checked.");
ABSL_FLAG(absl::Duration, interval, absl::Seconds(1),
          "Each client sample's --interval (the wait before it samples).");
ABSL_FLAG(std::string, save_dir, "",
          "Also write every raw answer (the clients' JSON, nvidia-smi's "
          "output) into this existing folder.");

namespace metrics::gpu_check {
namespace {

using common::Subprocess;

constexpr absl::Duration kTimeout = absl::Seconds(60);

struct Output {
  int code = 0;
  std::string out;
  std::string err;
};

// Runs `argv`; NOT_FOUND when the program does not exist (exit 127).
absl::StatusOr<Output> Run(std::vector<std::string> argv) {
  const std::string what = argv[0];
  absl::StatusOr<std::unique_ptr<Subprocess>> p = Subprocess::Start(std::move(argv));
  if (!p.ok()) return p.status();
  absl::StatusOr<int> code = (*p)->Wait(kTimeout);
  if (!code.ok()) return code.status();
  if (*code == 127) return absl::NotFoundError(absl::StrCat(what, ": not found"));
  return Output{*code, (*p)->stdout_text(), (*p)->stderr_text()};
}

void Save(const std::string& name, const std::string& text) {
  const std::string dir = absl::GetFlag(FLAGS_save_dir);
  if (dir.empty()) return;
  std::ofstream(absl::StrCat(dir, "/", name)) << text;
}

absl::StatusOr<ClientReadings> Sample(const std::string& client,
                                      const std::vector<std::string>& command,
                                      int round) {
  absl::StatusOr<Output> run = Run(command);
  if (!run.ok()) return run.status();
  // "Python client" -> python-client-1.json
  Save(absl::StrCat(absl::AsciiStrToLower(absl::StrReplaceAll(client, {{" ", "-"}})), "-",
                    round, ".json"),
       run->out);
  if (run->code != 0) {
    return absl::InternalError(absl::StrCat(command[0], " exited with ", run->code,
                                            ": ", run->err));
  }
  absl::StatusOr<ClientReadings> readings = ParseClientReadings(run->out);
  if (!readings.ok()) {
    return absl::InternalError(absl::StrCat(client, "'s output: ",
                                            readings.status().message()));
  }
  return readings;
}

// nvidia-smi's answers; an error when it cannot be run at all.
absl::StatusOr<SmiAnswers> AskNvidiaSmi() {
  const std::string smi = absl::GetFlag(FLAGS_nvidia_smi);
  const std::vector<std::string> fields = QueryGpuFields();
  SmiAnswers answers;
  absl::StatusOr<Output> all =
      Run({smi, "--query-gpu=" + absl::StrJoin(fields, ","),
           "--format=csv,noheader,nounits"});
  if (!all.ok()) return all.status();
  Save("nvidia-smi-query-gpu.csv", all->out + all->err);
  if (all->code == 0) {
    absl::StatusOr<std::vector<SmiGpu>> gpus = ParseQueryGpu(all->out, fields);
    if (!gpus.ok()) return gpus.status();
    answers.gpus = *std::move(gpus);
  } else {
    // An older or newer nvidia-smi refuses the whole query for one field
    // it does not know: ask field by field.
    for (const std::string& field : fields) {
      if (field == "index") continue;
      absl::StatusOr<Output> one = Run({smi, "--query-gpu=index," + field,
                                        "--format=csv,noheader,nounits"});
      if (!one.ok()) return one.status();
      if (one->code != 0) {
        answers.unknown_fields.insert(field);
        continue;
      }
      absl::StatusOr<std::vector<SmiGpu>> gpus = ParseQueryGpu(one->out, {"index", field});
      if (!gpus.ok()) return gpus.status();
      answers.gpus.resize(std::max(answers.gpus.size(), gpus->size()));
      for (size_t i = 0; i < gpus->size(); ++i) {
        for (auto& [name, value] : (*gpus)[i]) answers.gpus[i][name] = value;
      }
    }
    if (answers.gpus.empty()) {
      return absl::InternalError(absl::StrCat(smi, " --query-gpu failed: ", all->out, all->err));
    }
  }
  absl::StatusOr<Output> apps = Run({smi, "--query-compute-apps=gpu_uuid,pid,used_memory",
                                     "--format=csv,noheader,nounits"});
  if (apps.ok()) Save("nvidia-smi-compute-apps.csv", apps->out + apps->err);
  if (!apps.ok() || apps->code != 0) {
    answers.processes_error = apps.ok() ? apps->out + apps->err : apps.status().ToString();
  } else if (absl::StatusOr<std::vector<SmiProcess>> p = ParseComputeApps(apps->out);
             p.ok()) {
    answers.processes = *std::move(p);
  } else {
    answers.processes_error = std::string(p.status().message());
  }
  absl::StatusOr<Output> dmon = Run({smi, "dmon", "-c", "1", "-s", "t"});
  if (dmon.ok()) Save("nvidia-smi-dmon.txt", dmon->out + dmon->err);
  if (!dmon.ok() || dmon->code != 0) {
    answers.dmon_error = dmon.ok() ? dmon->out + dmon->err : dmon.status().ToString();
  } else if (auto d = ParseDmon(dmon->out); d.ok()) {
    answers.dmon = *std::move(d);
  } else {
    answers.dmon_error = std::string(d.status().message());
  }
  return answers;
}

void PrintNotes(const std::vector<ClientReadings>& readings) {
  std::vector<std::string> notes;
  for (const ClientReadings& r : readings) {
    for (const std::string& note : r.notes) {
      if (std::find(notes.begin(), notes.end(), note) == notes.end()) notes.push_back(note);
    }
  }
  if (notes.empty()) return;
  std::cout << "\nThe client's notes:\n";
  for (const std::string& note : notes) std::cout << "- " << note << "\n";
}

// Samples with `command`, asks nvidia-smi, samples again, and prints the
// verdicts. 0: all agree; 1: some differ; 2: the check could not be made.
int Check(const std::string& client, const std::vector<std::string>& command, int64_t pid) {
  std::cout << "\n## " << client << "\n\n";
  absl::StatusOr<ClientReadings> first = Sample(client, command, 1);
  if (!first.ok()) {
    std::cout << "Could not sample: " << first.status().message() << "\n";
    return 2;
  }
  absl::StatusOr<SmiAnswers> smi = AskNvidiaSmi();
  absl::StatusOr<ClientReadings> second = Sample(client, command, 2);
  std::vector<ClientReadings> readings = {*std::move(first)};
  if (second.ok()) {
    readings.push_back(*std::move(second));
  } else {
    std::cout << "The second sample failed (" << second.status().message()
              << "); judged on the first alone.\n\n";
  }
  CompareOptions options;
  if (pid > 0) options.pid = pid;
  options.pid_visible = [](int64_t pid) {
    return ::access(absl::StrCat("/proc/", pid).c_str(), F_OK) == 0;
  };
  int code = 0;
  std::vector<Row> rows;
  if (smi.ok()) {
    rows = Compare(*smi, readings, options);
    if (!smi->processes.has_value()) {
      std::cout << "nvidia-smi --query-compute-apps failed: " << smi->processes_error << "\n\n";
    }
    if (!smi->dmon.has_value()) {
      std::cout << "nvidia-smi dmon failed: " << smi->dmon_error << "\n\n";
    }
  } else {
    std::cout << "nvidia-smi could not be asked (" << smi.status().message()
              << "): the client's readings alone.\n\n";
    rows = ReadingsOnly(readings);
    code = 2;
  }
  std::cout << MarkdownTable(rows, client) << "\n" << client << ": " << Tally(rows) << "\n";
  PrintNotes(readings);
  for (const Row& r : rows) {
    if (r.verdict == Verdict::kDiffer) code = std::max(code, 1);
  }
  return code;
}

// One of the bundle's programs, through --loader when there is one.
std::vector<std::string> BundledCommand(const std::string& program) {
  std::vector<std::string> command;
  if (!absl::GetFlag(FLAGS_loader).empty()) {
    command = {absl::GetFlag(FLAGS_loader), "--library-path",
               absl::GetFlag(FLAGS_library_path)};
  }
  command.push_back(program);
  return command;
}

// gpu-load, started and holding its memory; null (having said why) when
// it cannot run.
std::unique_ptr<Subprocess> StartLoad() {
  std::vector<std::string> command = BundledCommand(absl::GetFlag(FLAGS_gpu_load));
  command.push_back(absl::StrCat("--mib=", absl::GetFlag(FLAGS_load_mib)));
  command.push_back("--cuda-library=" + absl::GetFlag(FLAGS_cuda_library));
  absl::StatusOr<std::unique_ptr<Subprocess>> load = Subprocess::Start(command);
  if (!load.ok()) {
    std::cout << "\nNo GPU load: " << load.status().message() << "\n";
    return nullptr;
  }
  absl::StatusOr<std::string> ready = (*load)->WaitForLine("ready: ", kTimeout);
  if (!ready.ok()) {
    (void)(*load)->Wait(absl::Seconds(5));
    std::cout << "\nNo GPU load: " << (*load)->stderr_text() << ready.status().message()
              << "\n";
    return nullptr;
  }
  std::cout << "\nA GPU load (gpu-load, pid " << (*load)->pid() << ") keeps the GPUs busy: "
            << ready->substr(ready->find("ready"));
  return *std::move(load);
}

// The Python client's check, where a python3 and the script are at hand.
int CheckPython(const std::vector<std::string>& shared, int64_t pid) {
  const std::string python = absl::GetFlag(FLAGS_python);
  const std::string script = absl::GetFlag(FLAGS_python_readings);
  if (python.empty() || script.empty()) return 0;
  absl::StatusOr<Output> version = Run({python, "--version"});
  if (!version.ok() || version->code != 0) {
    std::cout << "\n## Python client\n\n" << python
              << " cannot be run here: the Python client is not checked.\n";
    return 0;
  }
  std::vector<std::string> command = {python, script};
  command.insert(command.end(), shared.begin(), shared.end());
  return Check("Python client", command, pid);
}

int Main() {
  const std::string save_dir = absl::GetFlag(FLAGS_save_dir);
  if (!save_dir.empty() && ::access(save_dir.c_str(), W_OK) != 0) {
    std::cerr << "gpu-check: --save-dir " << save_dir << ": not a folder this user may write\n";
    return 2;
  }
  std::cout << "# GPU check, " << absl::FormatTime("%Y-%m-%d %H:%M UTC", absl::Now(),
                                                   absl::UTCTimeZone())
            << "\n";
  int64_t pid = absl::GetFlag(FLAGS_pid);
  std::unique_ptr<Subprocess> load;
  if (absl::GetFlag(FLAGS_load)) {
    load = StartLoad();
    if (load != nullptr && pid == 0) pid = load->pid();
  }
  const std::string interval = absl::FormatDuration(absl::GetFlag(FLAGS_interval));
  std::vector<std::string> shared = {"--nvml-library=" + absl::GetFlag(FLAGS_nvml_library),
                                     "--interval=" + interval};
  if (pid > 0) shared.push_back(absl::StrCat("--pid=", pid));
  std::vector<std::string> agent = BundledCommand(absl::GetFlag(FLAGS_agent));
  agent.insert(agent.end(), {"--once", "--json"});
  agent.insert(agent.end(), shared.begin(), shared.end());
  const int agent_code = Check("metrics-agent", agent, pid);
  const int python_code = CheckPython(shared, pid);
  // Subprocess's destructor kills the load and reaps it.
  return std::max(agent_code, python_code);
}

}  // namespace
}  // namespace metrics::gpu_check

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "holds metrics-agent's GPU readings (and the Python client's) against "
      "nvidia-smi's.\n\n"
      "Usage: gpu-check [--load | --pid PID] [--save-dir DIR]\n"
      "       (from the bundle: gpu-check/run [--load | --pid PID] [--save-dir DIR])\n\n"
      "Each client samples twice (--once --json), before and after "
      "nvidia-smi --query-gpu, --query-compute-apps and dmon are asked; a "
      "Markdown table per client shows each signal of each GPU as both "
      "answer it, the tolerance and the verdict.\n\n"
      "Exit status: 0 when every reading agrees (or neither answers), 1 when "
      "one differs, 2 when the check could not be made (no nvidia-smi, a "
      "client that fails).");
  metrics::common::ListFlagsInHelp("tools/gpu_check/gpu_check_main.cc");
  std::vector<char*> args = metrics::common::DashedFlagsToUnderscores(argc, argv);
  absl::ParseCommandLine(static_cast<int>(args.size()), args.data());
  return metrics::gpu_check::Main();
}
