// Fuzz target: what metricsd and metricsctl do to their command line and
// database URL before anything else: the dashes-to-underscores rewrite of
// flag names, and the resolution of --database-url. The input is split at
// NUL bytes into arguments; the first is also taken as a URL.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/str_split.h"
#include "common/command_line.h"
#include "common/database_url.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string input(reinterpret_cast<const char*>(data), size);
  std::vector<std::string> args =
      absl::StrSplit(input, absl::ByChar('\0'));
  (void)metrics::common::ResolveDatabaseUrl(args.front());
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  const std::vector<char*> rewritten = metrics::common::DashedFlagsToUnderscores(
      static_cast<int>(args.size()), argv.data());
  // Same arguments, in order; only flag names may change.
  if (rewritten.size() < args.size()) __builtin_trap();
  for (size_t i = 0; i < args.size(); ++i) {
    if (std::strlen(rewritten[i]) != args[i].size()) __builtin_trap();
  }
  return 0;
}
