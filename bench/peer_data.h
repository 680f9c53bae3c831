// The peers benchmark's data set (docs/benchmarks.md, "Against Prometheus
// and VictoriaMetrics"): the storage benchmark's agent (realistic_agent.h)
// held in memory as a matrix, with one-sample spikes planted in it, and the
// three forms the systems compared take it in: our ingest batches, an
// OpenMetrics file for `promtool tsdb create-blocks-from openmetrics`, and
// JSON lines for VictoriaMetrics' /api/v1/import. The peers get each
// sample's time to the millisecond (their resolution) and its value exactly
// (shortest round-trip decimal).
//
// Thread-safety: a value type; const methods are safe from any thread.
#ifndef METRICS_BENCH_PEER_DATA_H_
#define METRICS_BENCH_PEER_DATA_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "proto/metrics/v1/ingest.pb.h"

namespace metrics::bench {

// A sample that stands out from its series' noise by far: a GPU stalled to
// 0 % for one second, or the CPU at 100 % for one second.
struct Spike {
  int64_t report = 0;
  int series = 0;
  double value = 0;
  bool dip = false;  // a minimum (else a maximum) a chart must show
};

class PeerData {
 public:
  // `reports` reports a second from `start_s`, with 24 spikes planted in
  // the last hour (so every window ending at the data's end holds them),
  // each in a series of its own.
  static PeerData Generate(int64_t start_s, int64_t reports);

  struct SeriesLabels {
    std::string name;
    std::string gpu_uuid;  // empty for a host series
  };
  const std::vector<SeriesLabels>& series() const { return series_; }
  const std::vector<Spike>& spikes() const { return spikes_; }
  int64_t reports() const { return static_cast<int64_t>(time_us_.size()); }
  int64_t time_us(int64_t report) const { return time_us_[report]; }
  int64_t time_ms(int64_t report) const { return time_us_[report] / 1000; }
  double value(int64_t report, int series) const {
    return values_[report * series_.size() + series];
  }
  static constexpr const char* kAgent = "node-17.cluster.example.com";
  // The peers' metric: every series is `system{name=..., agent=..., gpu=...}`,
  // as our store keeps them (one metric group, the name a label).
  static constexpr const char* kPeerMetric = "system";

  // Reports [first, last) as batches of `per_batch` reports for `trial`,
  // each declaring every series (an agent's batch).
  std::vector<v1::SystemMetricsBatch> Batches(int32_t trial, int64_t first,
                                              int64_t last,
                                              int per_batch) const;

  // Writes reports [first, last) to `path` as OpenMetrics text, series by
  // series, ending in "# EOF".
  absl::Status WriteOpenMetrics(int64_t first, int64_t last,
                                const std::string& path) const;

  // Reports [first, last) as VictoriaMetrics' JSON lines: one line a series.
  std::string VictoriaMetricsLines(int64_t first, int64_t last) const;

 private:
  // The peers' label set of series `s`, in Prometheus' text form
  // (`name="...",agent="..."[,gpu="..."]`).
  std::string PeerLabels(int s) const;

  std::vector<SeriesLabels> series_;
  std::vector<int64_t> time_us_;
  std::vector<double> values_;  // report-major
  std::vector<Spike> spikes_;
};

}  // namespace metrics::bench

#endif  // METRICS_BENCH_PEER_DATA_H_
