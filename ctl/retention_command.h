// "metricsctl retention apply": raw-data retention on demand
// (storage/pg/jobs/raw_retention.h), the same as metricsd --raw-retention does
// every hour.
//
// Thread-safety: for main's thread.
#ifndef METRICS_CTL_RETENTION_COMMAND_H_
#define METRICS_CTL_RETENTION_COMMAND_H_

#include <optional>
#include <string>
#include <vector>

namespace metrics::ctl {

struct RetentionArgs {
  std::vector<std::string> words;  // "retention", then the subcommand
  std::string database_url;        // resolved already
  std::optional<std::string> raw_retention;
  bool dry_run = false;
  bool help = false;
};

extern const char kRetentionHelp[];

// The exit status: 0 done, 1 failed, 2 bad usage.
int RunRetentionCommand(const RetentionArgs& args);

}  // namespace metrics::ctl

#endif  // METRICS_CTL_RETENTION_COMMAND_H_
