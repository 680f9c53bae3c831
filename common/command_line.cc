#include "common/command_line.h"

#include <cstring>
#include <string>

#include "absl/flags/usage_config.h"
#include "absl/strings/match.h"

namespace metrics::common {

std::vector<char*> DashedFlagsToUnderscores(int argc, char** argv) {
  std::vector<char*> out(argv, argv + argc);
  for (int i = 1; i < argc; ++i) {
    char* arg = argv[i];
    if (std::strcmp(arg, "--") == 0) break;
    if (std::strncmp(arg, "--", 2) != 0) continue;
    for (char* c = arg + 2; *c != '\0' && *c != '='; ++c) {
      if (*c == '-') *c = '_';
    }
  }
  return out;
}

void ListFlagsInHelp(absl::string_view main_file) {
  absl::FlagsUsageConfig usage;
  usage.contains_help_flags = [file = std::string(main_file)](
                                  absl::string_view path) {
    return absl::EndsWith(path, file);
  };
  absl::SetFlagsUsageConfig(usage);
}

}  // namespace metrics::common
