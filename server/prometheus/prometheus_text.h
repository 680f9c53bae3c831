// Writes the Prometheus text exposition format (version 0.0.4): families
// with HELP and TYPE lines, samples with escaped label values, histograms
// as _bucket/_sum/_count.
//
// Usage:
//   PrometheusText out;
//   out.Family("metricsd_open_streams", "gauge", "Streams open now.");
//   out.Sample("metricsd_open_streams", {{"rpc", "FollowSeries"}}, 3);
//   std::string body = out.Take();
//
// Thread-compatible.
#ifndef METRICS_SERVER_PROMETHEUS_PROMETHEUS_TEXT_H_
#define METRICS_SERVER_PROMETHEUS_PROMETHEUS_TEXT_H_

#include <string>
#include <utility>
#include <vector>

#include "absl/strings/string_view.h"
#include "common/histogram.h"

namespace metrics::server {

using PrometheusLabels =
    std::vector<std::pair<absl::string_view, absl::string_view>>;

class PrometheusText {
 public:
  // Starts a family; every sample of it must follow before the next one.
  void Family(absl::string_view name, absl::string_view type,
              absl::string_view help);
  void Sample(absl::string_view name, const PrometheusLabels& labels,
              double value);
  // The _bucket, _sum and _count samples of a histogram family `name`.
  void Histogram(absl::string_view name, const PrometheusLabels& labels,
                 const common::HistogramSnapshot& snapshot);

  std::string Take() { return std::move(text_); }

 private:
  std::string text_;
};

// A metric name made of `text`: characters outside [a-zA-Z0-9_] become
// '_', and a leading digit gets a '_' before it.
std::string PrometheusName(absl::string_view text);

}  // namespace metrics::server

#endif  // METRICS_SERVER_PROMETHEUS_PROMETHEUS_TEXT_H_
