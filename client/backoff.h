// Reconnect delays: exponential growth with random jitter, so that many
// hosts that lost the server at once do not all come back at the same
// instant (the "thundering herd").
//
// Usage:
//   Backoff backoff(absl::Milliseconds(200), absl::Seconds(30), 2.0, 0.2);
//   absl::SleepFor(backoff.Next());   // after a failure
//   backoff.Reset();                  // after a success
//
// Thread-compatible.
#ifndef METRICS_CLIENT_BACKOFF_H_
#define METRICS_CLIENT_BACKOFF_H_

#include "absl/random/random.h"
#include "absl/time/time.h"

namespace metrics::client {

class Backoff {
 public:
  // The n-th delay (from 0) is min(initial * multiplier^n, max), times a
  // random factor in [1 - jitter, 1 + jitter].
  Backoff(absl::Duration initial, absl::Duration max, double multiplier,
          double jitter)
      : initial_(initial),
        max_(max),
        multiplier_(multiplier),
        jitter_(jitter),
        next_(initial) {}

  absl::Duration Next();
  void Reset() { next_ = initial_; }

 private:
  const absl::Duration initial_;
  const absl::Duration max_;
  const double multiplier_;
  const double jitter_;
  absl::Duration next_;
  absl::BitGen random_;
};

}  // namespace metrics::client

#endif  // METRICS_CLIENT_BACKOFF_H_
