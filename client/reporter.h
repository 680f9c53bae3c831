// Reporter: streams a trial's system metrics from one host to metricsd, so
// that the server stores every sample exactly once and the training process
// is never slowed by the network.
//
// Record() only appends to a bounded in-memory buffer. A background thread
// groups samples into batches (by size or age), sends them over
// IngestService.StreamSystemMetrics, and keeps each batch until the server
// acknowledges it. When the connection breaks (server restart, network,
// overload) it reconnects with exponential backoff and jitter and resends
// what was not acknowledged under the same stream id and sequence numbers;
// the server skips what it already has. Errors the server marks as permanent
// (an unknown or finished trial, a malformed batch) are not retried.
//
// Usage:
//   ReporterOptions options;
//   options.server_address = "localhost:8081";
//   options.trial_id = 7;
//   options.agent_id = "host-1";
//   ASSIGN_OR_RETURN(std::unique_ptr<Reporter> reporter,
//                    Reporter::Create(std::move(options)));
//   RETURN_IF_ERROR(reporter->Record(absl::Now(),
//                                    {{"cpu_util_simple", 37.5, "percent"}}));
//   ...
//   absl::Status unsent = reporter->Shutdown(absl::Now() + absl::Seconds(5));
//
// Thread-safety: thread-safe. Record, Flush and stats may be called from any
// thread, concurrently.
#ifndef METRICS_CLIENT_REPORTER_H_
#define METRICS_CLIENT_REPORTER_H_

#include <cstdint>
#include <memory>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "client/reporter_options.h"

namespace metrics::client {

// One value of one series. The views need to live only during Record.
struct Measurement {
  absl::string_view name;  // e.g. "gpu_util"
  double value = 0;        // finite
  absl::string_view unit;  // e.g. "percent"; fixed for the life of a series
  absl::string_view gpu_uuid = {};  // empty for an agent-wide series
};

// What happened to the samples so far. Every recorded sample ends up
// acknowledged, rejected, dropped or unsent:
//   recorded == acknowledged + rejected + dropped + buffered (+ unsent
//   after Shutdown, when buffered is 0).
struct ReporterStats {
  int64_t recorded = 0;      // accepted by Record
  int64_t sent = 0;          // put on the wire at least once
  int64_t acknowledged = 0;  // stored by the server
  int64_t rejected = 0;      // refused by the server (bad input); not retried
  int64_t dropped = 0;       // lost to the overflow policy
  int64_t retried = 0;       // sent again after a reconnect (counted per send)
  int64_t buffered = 0;      // held now: waiting, or sent and unacknowledged
  int64_t unsent = 0;        // given up at Shutdown
  int64_t connections = 0;   // streams opened (1 + reconnects)
};

class Reporter {
 public:
  // INVALID_ARGUMENT naming the option when one is missing or out of range.
  // Does not wait for the server: samples are buffered until it answers.
  static absl::StatusOr<std::unique_ptr<Reporter>> Create(
      ReporterOptions options);

  // Shutdown(now + options.shutdown_timeout) unless already shut down.
  ~Reporter();

  Reporter(const Reporter&) = delete;
  Reporter& operator=(const Reporter&) = delete;

  // Buffers values measured at `time` (at most microsecond precision is
  // kept). All or nothing: either every value is buffered or none is.
  //   INVALID_ARGUMENT: a value is not finite, a name is empty, or more
  //     values than the buffer holds.
  //   RESOURCE_EXHAUSTED: kBlock and no room within block_timeout (the
  //     values count as dropped), or a new series past max_series.
  //   FAILED_PRECONDITION: after Shutdown.
  //   Otherwise the permanent error that stopped the reporter (for example
  //   FAILED_PRECONDITION when the trial has ended, NOT_FOUND for an
  //   unknown trial).
  // Never waits on the network; waits only under kBlock with a full buffer.
  absl::Status Record(absl::Time time, absl::Span<const Measurement> values);

  // Sends everything buffered now, without waiting for batches to fill,
  // and waits until it is acknowledged. OK when nothing is left;
  // DEADLINE_EXCEEDED saying how many samples are still buffered; or the
  // permanent error that stopped the reporter.
  absl::Status Flush(absl::Time deadline);

  // Refuses further Records, sends what is buffered until `deadline`, then
  // closes the stream and stops the thread. OK when every sample was
  // acknowledged (or rejected, or dropped, as counted in stats()); else
  // DEADLINE_EXCEEDED or the permanent error, with the count of samples
  // that could not be sent (also stats().unsent). Later calls return the
  // same result at once.
  absl::Status Shutdown(absl::Time deadline);

  ReporterStats stats() const;
  // The stream id used (generated unless set in the options).
  const std::string& stream_id() const;

 private:
  class Impl;
  explicit Reporter(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace metrics::client

#endif  // METRICS_CLIENT_REPORTER_H_
