#include "ctl/retention_command.h"


#include <algorithm>
#include <iostream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/time_format.h"
#include "ctl/progress_line.h"
#include "storage/pg/jobs/raw_retention.h"

namespace metrics::ctl {

const char kRetentionHelp[] =
    R"(Usage: metricsctl retention apply --raw-retention=DURATION [--dry-run] [--database-url URL]

Removes raw system rows (the metrics table's profiling partition, metric
group "system") older than DURATION ("30d", "720h"), agent by agent, in
steps of 10 000 rows, each a short transaction of its own: ingest and
queries go on meanwhile. The rollups stay: charts of those windows load from
the stored buckets (10 s and coarser) and say "raw data expired". Nothing
else is touched. The time before which raw rows are gone (the horizon) is
recorded first and never moves back. Ends with a VACUUM of the partition,
so new rows reuse the space. metricsd --raw-retention=DURATION does the same
at start and every hour.

  --raw-retention=DURATION  how long raw rows are kept
  --dry-run                 count the rows that would go; change nothing

Shows progress, then a summary.
)";

int RunRetentionCommand(const RetentionArgs& args) {
  const std::vector<std::string>& w = args.words;
  if (w.size() < 2 || w[1] != "apply" || args.help) {
    std::cout << kRetentionHelp;
    return args.help ? 0 : 2;
  }
  const auto usage = [](const std::string& message) {
    std::cerr << "metricsctl: " << message
              << "\nRun \"metricsctl retention apply --help\" for usage.\n";
    return 2;
  };
  if (w.size() > 2) return usage(absl::StrCat("unexpected argument \"", w[2], "\""));
  if (!args.raw_retention) {
    return usage("retention apply needs --raw-retention=DURATION");
  }
  const absl::StatusOr<absl::Duration> retention =
      common::ParseRawRetentionPeriod(*args.raw_retention);
  if (!retention.ok()) return usage(std::string(retention.status().message()));
  storage::pg::RetentionOptions options;
  options.database_url = args.database_url;
  options.raw_retention = *retention;
  options.dry_run = args.dry_run;
  ProgressLine progress;
  options.progress = [&](const storage::pg::RetentionProgress& p) {
    progress.Show(
        absl::StrFormat("%s: agent %d/%d (%s of trial %d), %d rows %s, %.1f s",
                        args.dry_run ? "counting" : "removing",
                        std::min(p.agents_done + 1, p.agents_total),
                        p.agents_total, p.agent_id, p.trial_id, p.rows,
                        args.dry_run ? "found" : "removed", progress.Seconds()),
        p.agents_done == p.agents_total);
  };
  absl::StatusOr<storage::pg::RetentionSummary> summary =
      storage::pg::ApplyRawRetention(options);
  progress.Finish();
  if (!summary.ok()) {
    std::cerr << "metricsctl: error: " << summary.status().message()
              << "\nWhat was removed stays removed; run it again to go on.\n";
    return 1;
  }
  const std::string horizon = common::Rfc3339(summary->horizon);
  if (args.dry_run) {
    std::cout << absl::StrFormat(
        "dry run: %d raw rows of %d agents are before %s and would be "
        "removed; nothing changed\n",
        summary->rows, summary->agents, horizon);
    return 0;
  }
  std::cout << absl::StrFormat(
      "removed %d raw rows before %s (%d agents) in %.1f s%s; rollups kept\n",
      summary->rows, horizon, summary->agents, progress.Seconds(),
      summary->vacuumed ? ", partition vacuumed" : "");
  return 0;
}

}  // namespace metrics::ctl
