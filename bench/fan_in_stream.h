// One agent of a fan-in benchmark (bench/ingest.sh, bench/follow.sh): a
// StreamSystemMetrics stream of realistic reports (tests/testing/
// realistic_batch.h) that sends one report when asked and reports how long
// each acknowledgement took.
//
// Thread-safety: SendOne, Close and the getters from any thread; callbacks
// run on gRPC's threads.
#ifndef METRICS_BENCH_FAN_IN_STREAM_H_
#define METRICS_BENCH_FAN_IN_STREAM_H_

#include <grpcpp/support/client_callback.h>

#include <cstdint>
#include <functional>
#include <map>
#include <string>

#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "proto/metrics/v1/ingest.grpc.pb.h"
#include "tests/testing/realistic_batch.h"

namespace metrics::bench {

class FanInStream : public grpc::ClientBidiReactor<
                        v1::StreamSystemMetricsRequest,
                        v1::StreamSystemMetricsResponse> {
 public:
  // `on_ack` gets each acknowledged report's send time and latency, on a
  // gRPC thread.
  using OnAck = std::function<void(absl::Time sent, double ms)>;

  FanInStream(v1::IngestService::Stub* stub, int32_t trial, std::string agent,
              OnAck on_ack)
      : agent_(std::move(agent)), on_ack_(std::move(on_ack)) {
    stub->async()->StreamSystemMetrics(&context_, this);
    open_.mutable_open()->set_stream_id(agent_);
    open_.mutable_open()->set_trial_id(trial);
    test_util::DeclareRealisticSeries(*template_.mutable_batch());
    template_.mutable_batch()->set_agent_id(agent_);
    writing_ = true;
    StartWrite(&open_);
    StartRead(&response_);
    // Held until the writes are done: a stream that fails meanwhile must
    // not end (OnDone) between SendOne's check and its StartWrite.
    AddHold();
    StartCall();
  }

  // Sends one report now, unless the previous write is still going out.
  void SendOne() {
    {
      absl::MutexLock lock(&mu_);
      if (!opened_ || writing_ || closing_ || done_) {
        ++skipped_;
        return;
      }
      request_ = template_;
      request_.mutable_batch()->set_sequence(++sequence_);
      test_util::AddRealisticReport(*request_.mutable_batch(), absl::Now(), sequence_);
      sent_[sequence_] = absl::Now();
      writing_ = true;
    }
    StartWrite(&request_);
  }

  void Close() {
    bool now;
    {
      absl::MutexLock lock(&mu_);
      closing_ = true;
      now = !writing_ && !writes_done_;
      writes_done_ |= now;
    }
    if (now) FinishWrites();
  }

  void OnWriteDone(bool) override {
    bool close;
    {
      absl::MutexLock lock(&mu_);
      writing_ = false;
      close = closing_ && !writes_done_;
      writes_done_ |= close;
    }
    if (close) FinishWrites();
  }

  void OnReadDone(bool ok) override {
    if (!ok) return;
    const absl::Time now = absl::Now();
    {
      absl::MutexLock lock(&mu_);
      opened_ = true;
      rejected_ += response_.rejected_size();
      if (response_.rejected_size() > 0 && first_rejection_.empty()) {
        first_rejection_ = response_.rejected(0).message();
      }
      for (auto it = sent_.begin();
           it != sent_.end() && it->first <= response_.acked_sequence();) {
        on_ack_(it->second, absl::ToDoubleMilliseconds(now - it->second));
        it = sent_.erase(it);
      }
    }
    StartRead(&response_);
  }

  void OnDone(const grpc::Status& status) override {
    absl::MutexLock lock(&mu_);
    status_ = status;
    done_ = true;
  }

  void Cancel() { context_.TryCancel(); }

  bool WaitDone(absl::Duration timeout) {
    absl::MutexLock lock(&mu_);
    return mu_.AwaitWithTimeout(absl::Condition(&done_), timeout);
  }
  grpc::Status status() {
    absl::MutexLock lock(&mu_);
    return status_;
  }
  int64_t skipped() {
    absl::MutexLock lock(&mu_);
    return skipped_;
  }
  // Batches the server acknowledged as refused (not stored), and why the
  // first was.
  int64_t rejected() {
    absl::MutexLock lock(&mu_);
    return rejected_;
  }
  std::string first_rejection() {
    absl::MutexLock lock(&mu_);
    return first_rejection_;
  }

 private:
  // Once, when no write is going out and none will be.
  void FinishWrites() {
    StartWritesDone();
    RemoveHold();
  }

  const std::string agent_;
  const OnAck on_ack_;
  grpc::ClientContext context_;
  v1::StreamSystemMetricsRequest open_, template_, request_;
  v1::StreamSystemMetricsResponse response_;
  absl::Mutex mu_;
  bool opened_ ABSL_GUARDED_BY(mu_) = false;
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  bool closing_ ABSL_GUARDED_BY(mu_) = false;
  bool writes_done_ ABSL_GUARDED_BY(mu_) = false;
  bool done_ ABSL_GUARDED_BY(mu_) = false;
  int64_t sequence_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t skipped_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t rejected_ ABSL_GUARDED_BY(mu_) = 0;
  std::string first_rejection_ ABSL_GUARDED_BY(mu_);
  std::map<int64_t, absl::Time> sent_ ABSL_GUARDED_BY(mu_);
  grpc::Status status_ ABSL_GUARDED_BY(mu_);
};

}  // namespace metrics::bench

#endif  // METRICS_BENCH_FAN_IN_STREAM_H_
