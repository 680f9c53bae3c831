// A Measurement of one of the vocabulary's signals: its name and unit come
// from the table (common/vocabulary/signals.json), so the agent cannot send
// a signal under another unit than the Python client does.
//
// Thread-safety: a pure function.
#ifndef METRICS_CLIENT_SIGNAL_VALUE_H_
#define METRICS_CLIENT_SIGNAL_VALUE_H_

#include "absl/strings/string_view.h"
#include "client/reporter.h"
#include "common/vocabulary/signals.h"

namespace metrics::client {

inline Measurement SignalValue(const signals::Signal& signal, double value,
                               absl::string_view gpu_uuid = {}) {
  return {signal.name, value, signal.unit, gpu_uuid};
}

}  // namespace metrics::client

#endif  // METRICS_CLIENT_SIGNAL_VALUE_H_
