// The storage benchmark's data set, shared with the peers benchmark: one
// agent's realistic trial as metrics-agent sends it. 9 host series and 2 per
// GPU for 8 GPUs with real-looking UUIDs (25 values a report, 1 s apart),
// with values as an agent has them: integers for bytes, GPU utilisation and
// open files, full-precision doubles for rates and CPU, two decimals for the
// load average, all with noise. With `gpu_signals`, also the 13 further NVML
// signals per GPU (129 values a report), as NVML gives them.
//
// Thread-safety: functions of their arguments (the generator is the
// caller's).
#ifndef METRICS_BENCH_REALISTIC_AGENT_H_
#define METRICS_BENCH_REALISTIC_AGENT_H_

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "proto/metrics/v1/ingest.pb.h"

namespace metrics::bench {

inline constexpr int kAgentGpus = 8;
inline constexpr int kHostSeriesCount = 9;
// {name, unit} of the host series, in the order of a report's values.
inline constexpr const char* kHostSeries[kHostSeriesCount][2] = {
    {"cpu_util_simple", "percent"},      {"memory_free", "bytes"},
    {"disk_iops", "operations/s"},       {"disk_throughput_read", "bytes/s"},
    {"disk_throughput_write", "bytes/s"}, {"net_throughput_sent", "bytes/s"},
    {"net_throughput_recv", "bytes/s"},  {"load_avg", ""},
    {"open_files", ""}};
// The two series of every GPU, after the host series, GPU by GPU.
inline constexpr const char* kGpuSeries[2][2] = {
    {"gpu_util", "percent"}, {"gpu_free_memory", "bytes"}};

// 25, or 129 with the further GPU signals.
int AgentValuesPerReport(bool gpu_signals);

// "GPU-5f3c1c4e-8f2b-1d2e-9a3b-4c5d6e7f8a9b", as NVML names GPUs.
std::vector<std::string> GpuUuids(std::mt19937_64& random);

// Declares the series in `batch`: the host series, then each GPU's two,
// then (with `gpu_signals`) each GPU's further signals.
void DeclareAgentSeries(v1::SystemMetricsBatch& batch,
                        const std::vector<std::string>& gpus, bool gpu_signals);

// Adds report `i` (at start_s + i seconds, with the agent's sub-second phase
// and jitter) with a value for every declared series: what /proc and NVML
// give, with a slow daily wave and noise.
void AddAgentReport(v1::SystemMetricsBatch& batch, int64_t start_s, int64_t i,
                    bool gpu_signals, std::mt19937_64& random);

}  // namespace metrics::bench

#endif  // METRICS_BENCH_REALISTIC_AGENT_H_
