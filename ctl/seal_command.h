// "metricsctl seal": seals every closed window now
// (storage/pg/jobs/sealer.h), as metricsd's sealer does every minute; for
// the first seal of a database upgraded with years of raw rows, or with
// metricsd's sealer turned off.
//
// Thread-safety: for main's thread.
#ifndef METRICS_CTL_SEAL_COMMAND_H_
#define METRICS_CTL_SEAL_COMMAND_H_

#include <optional>
#include <string>
#include <vector>

#include "absl/time/time.h"

namespace metrics::ctl {

struct SealArgs {
  std::vector<std::string> words;  // "seal"
  std::string database_url;        // resolved already
  std::optional<absl::Duration> grace;
  bool help = false;
};

extern const char kSealHelp[];

// The exit status: 0 done, 1 failed (or interrupted), 2 bad usage.
int RunSealCommand(const SealArgs& args);

}  // namespace metrics::ctl

#endif  // METRICS_CTL_SEAL_COMMAND_H_
