// SIGINT and SIGTERM as a request to stop, for the programs (metricsd,
// metrics-agent): blocked in every thread and taken with sigwait, so the
// stop runs as ordinary code rather than in a signal handler.
//
// Thread-safety: call BlockStopSignals in main before starting any thread
// (threads inherit the mask); WaitForStopSignal from one thread.
#ifndef METRICS_COMMON_STOP_SIGNALS_H_
#define METRICS_COMMON_STOP_SIGNALS_H_

#include <signal.h>

namespace metrics::common {

// Blocks SIGINT and SIGTERM in this thread and returns the set.
sigset_t BlockStopSignals();

// Waits for one of `signals` and returns its number.
int WaitForStopSignal(const sigset_t& signals);

}  // namespace metrics::common

#endif  // METRICS_COMMON_STOP_SIGNALS_H_
