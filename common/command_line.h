// Command-line helpers shared by the programs (metricsd, metrics-agent).
//
// Thread-safety: pure functions (they edit only the argv given).
#ifndef METRICS_COMMON_COMMAND_LINE_H_
#define METRICS_COMMON_COMMAND_LINE_H_

#include <vector>

namespace metrics::common {

// absl flags are named with underscores; this accepts the usual dashed
// spelling (--database-url) by rewriting flag names in place, never their
// values, up to a "--". Returns argv as a vector for absl::ParseCommandLine.
std::vector<char*> DashedFlagsToUnderscores(int argc, char** argv);

}  // namespace metrics::common

#endif  // METRICS_COMMON_COMMAND_LINE_H_
