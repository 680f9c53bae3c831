// What nvidia-smi answers, parsed: its CSV of --query-gpu (with
// --format=csv,noheader,nounits), of --query-compute-apps, and the table
// of `dmon -s t` (PCIe throughput). NVIDIA's own tool is the reference the
// GPU check holds the agent's readings against (docs/testing.md, "The GPU
// check").
//
// Thread-safety: pure functions.
#ifndef METRICS_TOOLS_GPU_CHECK_NVIDIA_SMI_H_
#define METRICS_TOOLS_GPU_CHECK_NVIDIA_SMI_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace metrics::gpu_check {

// A field's value as a number: decimal, or hexadecimal after "0x" (the
// throttle reasons); unset for nvidia-smi's "[N/A]", "[Not Supported]" and
// the like, or anything else that is not a number.
std::optional<double> SmiNumber(absl::string_view text);

// One GPU's line of --query-gpu: field name -> its text as printed.
using SmiGpu = std::map<std::string, std::string>;

// The lines of `--query-gpu=<fields>` (fields comma-separated, in that
// order). The last field may hold ", " (a GPU's name): put "name" last.
// INVALID_ARGUMENT naming the line when one has too few fields.
absl::StatusOr<std::vector<SmiGpu>> ParseQueryGpu(
    absl::string_view csv, const std::vector<std::string>& fields);

struct SmiProcess {
  std::string gpu_uuid;
  int64_t pid = 0;
  std::optional<double> used_mib;  // unset: "[N/A]" (no rights to see it)
};

// The lines of `--query-compute-apps=gpu_uuid,pid,used_memory`.
absl::StatusOr<std::vector<SmiProcess>> ParseComputeApps(absl::string_view csv);

// `dmon -c 1 -s t`: per GPU index, column name ("rxpci", "txpci") -> value
// in its unit (MB/s); a "-" is left out.
absl::StatusOr<std::map<int, std::map<std::string, double>>> ParseDmon(
    absl::string_view text);

}  // namespace metrics::gpu_check

#endif  // METRICS_TOOLS_GPU_CHECK_NVIDIA_SMI_H_
