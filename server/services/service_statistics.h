// The service's own statistics that only the RPC layer sees, for /metrics:
// streams open now, by RPC, and the latency of unary queries. The ingest
// statistics come from the store (storage::IngestStatistics), the legacy call
// counts from LegacyStatistics.
//
// Thread-safety: thread-safe.
#ifndef METRICS_SERVER_SERVICES_SERVICE_STATISTICS_H_
#define METRICS_SERVER_SERVICES_SERVICE_STATISTICS_H_

#include <atomic>
#include <cstdint>

#include "common/histogram.h"

namespace metrics::server {

class ServiceStatistics {
 public:
  // Counts one open stream while it lives; a reactor holds one.
  class OpenStream {
   public:
    OpenStream() = default;
    explicit OpenStream(std::atomic<int64_t>* gauge) : gauge_(gauge) {
      if (gauge_ != nullptr) ++*gauge_;
    }
    OpenStream(OpenStream&& other) noexcept : gauge_(other.gauge_) {
      other.gauge_ = nullptr;
    }
    OpenStream& operator=(OpenStream&&) = delete;
    ~OpenStream() {
      if (gauge_ != nullptr) --*gauge_;
    }

   private:
    std::atomic<int64_t>* gauge_ = nullptr;
  };

  OpenStream OpenIngestStream() { return OpenStream(&ingest_streams_); }
  OpenStream OpenFollowStream() { return OpenStream(&follow_streams_); }
  int64_t ingest_streams() const { return ingest_streams_; }
  int64_t follow_streams() const { return follow_streams_; }

  common::Histogram& list_series_seconds() { return list_series_seconds_; }
  common::Histogram& query_series_seconds() { return query_series_seconds_; }
  common::Histogram& summarize_series_seconds() { return summarize_series_seconds_; }
  const common::Histogram& summarize_series_seconds() const {
    return summarize_series_seconds_;
  }
  const common::Histogram& list_series_seconds() const {
    return list_series_seconds_;
  }
  const common::Histogram& query_series_seconds() const {
    return query_series_seconds_;
  }

 private:
  std::atomic<int64_t> ingest_streams_{0};
  std::atomic<int64_t> follow_streams_{0};
  common::Histogram list_series_seconds_{common::Histogram::LatencyBounds()};
  common::Histogram query_series_seconds_{common::Histogram::LatencyBounds()};
  common::Histogram summarize_series_seconds_{common::Histogram::LatencyBounds()};
};

}  // namespace metrics::server

#endif  // METRICS_SERVER_SERVICES_SERVICE_STATISTICS_H_
