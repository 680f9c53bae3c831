#include "client/backoff.h"

#include <algorithm>

namespace metrics::client {

absl::Duration Backoff::Next() {
  const absl::Duration base = std::min(next_, max_);
  next_ = std::min(base * multiplier_, max_);
  if (jitter_ <= 0) return base;
  return base * absl::Uniform(random_, 1.0 - jitter_, 1.0 + jitter_);
}

}  // namespace metrics::client
