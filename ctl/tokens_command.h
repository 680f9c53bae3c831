// "metricsctl tokens create|list|revoke": the operator's side of API tokens
// (storage/pg/pg_token_store.h). A created token's secret is printed once,
// alone on the last line of stdout, so a script can take it with `tail -1`.
//
// Thread-safety: for main's thread.
#ifndef METRICS_CTL_TOKENS_COMMAND_H_
#define METRICS_CTL_TOKENS_COMMAND_H_

#include <optional>
#include <string>
#include <vector>

namespace metrics::ctl {

struct TokensArgs {
  std::vector<std::string> words;  // "tokens", then the subcommand and its ID
  std::string database_url;        // resolved already
  std::optional<std::string> role;
  std::optional<int> trial;
  std::optional<std::string> ttl;
  std::optional<std::string> name;
  bool help = false;
};

extern const char kTokensHelp[];

// The exit status: 0 done, 1 failed, 2 bad usage.
int RunTokensCommand(const TokensArgs& args);

}  // namespace metrics::ctl

#endif  // METRICS_CTL_TOKENS_COMMAND_H_
