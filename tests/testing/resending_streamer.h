// A test client for StreamSystemMetrics that does what a reliable client
// must: open the stream, learn the server's position from its first answer,
// send the batches after it (at most `window` unacknowledged), and on any
// failure reconnect (to wherever `target()` now points) and resend from the
// last acknowledgement, until every batch is acknowledged. The production
// client library has more (buffering, Record API); this is the protocol
// alone, to test the server's exactly-once promise.
//
// Thread-safety: thread-compatible; SendAll uses a reader thread inside.
#ifndef METRICS_TESTS_TESTING_RESENDING_STREAMER_H_
#define METRICS_TESTS_TESTING_RESENDING_STREAMER_H_

#include <grpcpp/security/credentials.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "proto/metrics/v1/ingest.grpc.pb.h"

namespace metrics::test_util {

struct StreamerOptions {
  std::string stream_id;
  int32_t trial_id = 0;
  int window = 32;
  absl::Duration timeout = absl::Seconds(120);
  // Null: plaintext. The token, when set, goes as "authorization: Bearer".
  std::shared_ptr<grpc::ChannelCredentials> credentials;
  std::string token;
  // Called with each new acknowledged sequence number, on the reader thread.
  std::function<void(int64_t acked)> on_ack;
};

class ResendingStreamer {
 public:
  ResendingStreamer(std::function<std::string()> target,
                    StreamerOptions options)
      : target_(std::move(target)), options_(std::move(options)) {}

  // Sends batches[i] as sequence i + 1 until all are acknowledged.
  // DEADLINE_EXCEEDED (with the last error) after options.timeout; a
  // stream-level error that retrying cannot fix (INVALID_ARGUMENT,
  // NOT_FOUND, FAILED_PRECONDITION other than a sequence gap) is returned.
  absl::Status SendAll(std::vector<v1::SystemMetricsBatch> batches) {
    return Send(batches);
  }
  // The same with `batches` lent, not given: their sequence numbers are
  // set, and they stay the caller's to free (a benchmark frees them after
  // its clock stops).
  absl::Status Send(std::vector<v1::SystemMetricsBatch>& batches);

  int connections() const { return connections_; }
  const std::vector<v1::BatchRejection>& rejections() const {
    return rejections_;
  }

 private:
  std::function<std::string()> target_;
  StreamerOptions options_;
  int connections_ = 0;
  std::vector<v1::BatchRejection> rejections_;
};

}  // namespace metrics::test_util

#endif  // METRICS_TESTS_TESTING_RESENDING_STREAMER_H_
