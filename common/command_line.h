// Command-line helpers shared by the programs (metricsd, metrics-agent).
//
// Thread-safety: pure functions (they edit only the argv given).
#ifndef METRICS_COMMON_COMMAND_LINE_H_
#define METRICS_COMMON_COMMAND_LINE_H_

#include <vector>

#include "absl/strings/string_view.h"

namespace metrics::common {

// absl flags are named with underscores; this accepts the usual dashed
// spelling (--database-url) by rewriting flag names in place, never their
// values, up to a "--". Returns argv as a vector for absl::ParseCommandLine.
std::vector<char*> DashedFlagsToUnderscores(int argc, char** argv);

// Makes --help list the flags defined in the file whose path ends with
// `main_file` (such as "server/main.cc"). absl lists those of the file
// named like the program, and no program's main file is: without this,
// --help says "No flags matched". Call before absl::ParseCommandLine.
void ListFlagsInHelp(absl::string_view main_file);

}  // namespace metrics::common

#endif  // METRICS_COMMON_COMMAND_LINE_H_
