// What `metrics-agent --once` prints: one sample of this host as the agent
// would send it, with no server needed. As JSON (SampleJson): every series
// with its unit (a GPU's with the GPU's index and UUID), the inventory, the
// compute processes NVML lists on each GPU, and the notes on what is not
// supported and the errors of this sample; or as lines of text
// (SampleText). docs/clients.md, "What will the agent send from this host?",
// shows both.
//
// Thread-safety: pure functions.
#ifndef METRICS_CLIENT_SAMPLE_REPORT_H_
#define METRICS_CLIENT_SAMPLE_REPORT_H_

#include <optional>
#include <string>
#include <vector>

#include "client/nvml.h"
#include "client/system_sampler.h"
#include "proto/metrics/v1/ingest.pb.h"

namespace metrics::client {

struct SampleReport {
  const Sample* sample = nullptr;
  const v1::AgentInventory* inventory = nullptr;
  // Per GPU of the inventory (in its order), Nvml::ComputeProcesses's
  // answer; empty without NVML.
  std::vector<std::optional<std::vector<Nvml::GpuProcess>>> processes;
  double interval_seconds = 0;  // what the rates are over
};

std::string SampleJson(const SampleReport& report);
std::string SampleText(const SampleReport& report);

}  // namespace metrics::client

#endif  // METRICS_CLIENT_SAMPLE_REPORT_H_
