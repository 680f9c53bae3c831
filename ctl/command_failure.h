// How a metricsctl command ends on an error: its message on stderr, after
// "metricsctl: error: ", and exit status 1.
//
// Thread-safety: writes to std::cerr; called from the command's thread.
#ifndef METRICS_CTL_COMMAND_FAILURE_H_
#define METRICS_CTL_COMMAND_FAILURE_H_

#include <iostream>

#include "absl/status/status.h"

namespace metrics::ctl {

inline int Fail(const absl::Status& status) {
  std::cerr << "metricsctl: error: " << status.message() << "\n";
  return 1;
}

}  // namespace metrics::ctl

#endif  // METRICS_CTL_COMMAND_FAILURE_H_
