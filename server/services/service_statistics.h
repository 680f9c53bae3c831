// The service's own statistics that only the RPC layer sees, for /metrics:
// streams open now, by RPC. The latency of unary calls is each method's own
// (UnaryMethod::latency), the ingest statistics come from the store
// (storage::IngestStatistics), the legacy call counts from LegacyStatistics.
//
// Thread-safety: thread-safe.
#ifndef METRICS_SERVER_SERVICES_SERVICE_STATISTICS_H_
#define METRICS_SERVER_SERVICES_SERVICE_STATISTICS_H_

#include <atomic>
#include <cstdint>

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

 private:
  std::atomic<int64_t> ingest_streams_{0};
  std::atomic<int64_t> follow_streams_{0};
};

}  // namespace metrics::server

#endif  // METRICS_SERVER_SERVICES_SERVICE_STATISTICS_H_
