// The GPU check's verdicts: each signal of each GPU as nvidia-smi answers
// it beside a client's readings (two samples, taken before and after
// nvidia-smi's), and whether they agree within the signal's tolerance.
// A reading that moves (utilisation, power, clocks) agrees when nvidia-smi's
// value lies within the range of the client's two readings widened by the
// tolerance; a fixed one (total memory, power limit, UUID, name, driver)
// must be equal. docs/testing.md, "The GPU check", lists the tolerances.
//
// Thread-safety: pure functions.
#ifndef METRICS_TOOLS_GPU_CHECK_COMPARISON_H_
#define METRICS_TOOLS_GPU_CHECK_COMPARISON_H_

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "tools/gpu_check/client_readings.h"
#include "tools/gpu_check/nvidia_smi.h"

namespace metrics::gpu_check {

enum class Verdict {
  kAgree,
  kDiffer,
  kNeither,    // neither nvidia-smi nor the client answers (unsupported)
  kUnchecked,  // nvidia-smi could not be asked
};

struct Row {
  std::string signal;     // the vocabulary's name, or "uuid", "process 123"
  std::string gpu;        // nvidia-smi's index
  std::string smi;        // its answer, in its unit
  std::string client;     // the client's readings in nvidia-smi's unit
  std::string tolerance;  // e.g. "equal", "±10 %"
  Verdict verdict = Verdict::kUnchecked;
  std::string note;       // why, where it helps: the client's note, ...
};

// Everything nvidia-smi answered.
struct SmiAnswers {
  std::vector<SmiGpu> gpus;
  // Fields of QueryGpuFields this nvidia-smi does not know.
  std::set<std::string> unknown_fields;
  // Unset when the query failed (the why in *_error).
  std::optional<std::vector<SmiProcess>> processes;
  std::string processes_error;
  std::optional<std::map<int, std::map<std::string, double>>> dmon;
  std::string dmon_error;
};

struct CompareOptions {
  // The job the client sampled with --pid: its process_gpu_memory is held
  // against nvidia-smi's used_memory of that pid.
  std::optional<int64_t> pid;
  // Whether a pid NVML lists is a process of this PID namespace (a
  // container sees its own numbers; NVML may list the host's).
  std::function<bool(int64_t)> pid_visible = [](int64_t) { return true; };
};

// The fields to ask --query-gpu for, "name" last (ParseQueryGpu).
std::vector<std::string> QueryGpuFields();

// One row per GPU of nvidia-smi and signal, then per compute process;
// `readings` holds the client's samples (one or two).
std::vector<Row> Compare(const SmiAnswers& smi,
                         const std::vector<ClientReadings>& readings,
                         const CompareOptions& options);

// The client's GPU readings alone, each unchecked, in nvidia-smi's units
// (for when nvidia-smi cannot be asked).
std::vector<Row> ReadingsOnly(const std::vector<ClientReadings>& readings);

// The rows as a Markdown table, `client` naming the client's column.
std::string MarkdownTable(const std::vector<Row>& rows, const std::string& client);

// "40 agree, 1 differ, 3 answered by neither, 0 unchecked".
std::string Tally(const std::vector<Row>& rows);

}  // namespace metrics::gpu_check

#endif  // METRICS_TOOLS_GPU_CHECK_COMPARISON_H_
