// A streamed HTTP body made by a producer that pushes (a store read handing
// rows to a sink) for a transport that pulls (HttpResponse::Stream): the
// producer runs on a thread of its own and its chunks wait in a bounded
// queue, so a slow client slows the producer instead of filling memory.
// A client that leaves (the stream dropped) makes the producer's next emit
// fail with CANCELLED; the thread is joined when the body is dropped.
//
// Usage:
//   auto body = ProducedBody::Start([&](const ProducedBody::Emit& emit) {
//     return reads.StreamRawSamples(..., sink_that_calls_emit);
//   });
//   if (absl::Status s = body->AwaitStart(); !s.ok()) return ErrorResponse(s);
//   response.stream = ProducedBody::AsStream(std::move(body));
//
// Thread-safety: thread-safe; one producer thread, one puller at a time.
#ifndef METRICS_SERVER_HTTP_PRODUCED_BODY_H_
#define METRICS_SERVER_HTTP_PRODUCED_BODY_H_

#include <cstddef>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "server/http/http_server.h"

namespace metrics::server {

class ProducedBody {
 public:
  using Emit = std::function<absl::Status(std::string chunk)>;
  using Produce = std::function<absl::Status(const Emit& emit)>;

  // Starts `produce` on its own thread; at most `max_queued` chunks wait.
  static std::shared_ptr<ProducedBody> Start(Produce produce, size_t max_queued = 4);

  ProducedBody(const ProducedBody&) = delete;
  ProducedBody& operator=(const ProducedBody&) = delete;
  ~ProducedBody();  // the client is gone (if not done): stops and joins

  // Waits for the first chunk or the producer's end: the producer's error
  // when it failed before emitting anything (the answer can still carry an
  // error status), else OK.
  absl::Status AwaitStart();

  // The body as the transport pulls it: kEnd after the last chunk when the
  // producer succeeded, kAbort when it failed after emitting.
  static HttpResponse::Stream AsStream(std::shared_ptr<ProducedBody> body);

 private:
  explicit ProducedBody(size_t max_queued) : max_queued_(max_queued) {}
  absl::Status Put(std::string chunk);
  StreamStep Pull(std::string& chunk);

  const size_t max_queued_;
  absl::Mutex mu_;
  std::deque<std::string> queue_ ABSL_GUARDED_BY(mu_);
  bool emitted_ ABSL_GUARDED_BY(mu_) = false;
  bool done_ ABSL_GUARDED_BY(mu_) = false;  // the producer returned
  bool gone_ ABSL_GUARDED_BY(mu_) = false;  // the client left
  absl::Status result_ ABSL_GUARDED_BY(mu_);
  std::thread producer_;
};

}  // namespace metrics::server

#endif  // METRICS_SERVER_HTTP_PRODUCED_BODY_H_
