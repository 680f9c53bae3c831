// One sample of a client's GPU readings, parsed from what
// `metrics-agent --once --json` prints (docs/clients.md, "What will the
// agent send from this host?") or python_readings.py prints in the same
// shape for the Python client.
//
// Thread-safety: a pure function.
#ifndef METRICS_TOOLS_GPU_CHECK_CLIENT_READINGS_H_
#define METRICS_TOOLS_GPU_CHECK_CLIENT_READINGS_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace metrics::gpu_check {

struct ClientGpu {
  int index = 0;
  std::string name;
};

struct ClientReadings {
  // (signal, GPU UUID) -> value in the signal's unit; "" for the host's.
  std::map<std::pair<std::string, std::string>, double> values;
  // The inventory's GPUs by UUID, and its driver version.
  std::map<std::string, ClientGpu> gpus;
  std::string driver_version;
  // Per GPU UUID that could say, its compute processes: pid -> bytes
  // (unset where NVML cannot say).
  std::map<std::string, std::map<int64_t, std::optional<double>>> processes;
  // "GPU-...: gpu_power is not supported (...); not reported", ...
  std::vector<std::string> notes;
};

// INVALID_ARGUMENT naming what is missing when `json` is not such a sample.
absl::StatusOr<ClientReadings> ParseClientReadings(absl::string_view json);

}  // namespace metrics::gpu_check

#endif  // METRICS_TOOLS_GPU_CHECK_CLIENT_READINGS_H_
