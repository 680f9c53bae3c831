#include "ctl/seal_command.h"

#include <algorithm>
#include <csignal>
#include <iostream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "ctl/progress_line.h"
#include "storage/pg/jobs/sealer.h"

namespace metrics::ctl {

namespace {

volatile std::sig_atomic_t seal_interrupted = 0;

}  // namespace

const char kSealHelp[] =
    R"(Usage: metricsctl seal [--grace=DURATION] [--database-url URL]

Seals every closed window of raw system rows now: each agent's reports of a
10-minute window become one row holding them compressed along time, about a
third of the space (docs/storage.md, "Sealed windows"), and their values go
into the rollups, which ingest leaves to the seal (docs/storage.md,
"Rollups"). One short
transaction an agent and window or three, each under the agent's lock: ingest
and queries go on meanwhile, and metricsd's own sealers, or a second run,
wait their turn rather than seal anything twice. A window of a dense agent
(more reports than about 32 MiB holds, as metricsd's --seal-memory) is sealed
in parts, a row each, so memory stays bounded. Interrupted (Ctrl-C, a
kill, a lost connection), it keeps what it sealed; run it again to go on.
Then it vacuums the profiling partition, so reads do not step over the
taken rows' index entries until autovacuum comes round.

metricsd does the same every minute (--seal-every). Run this after upgrading
a database with many raw rows, to seal them before metricsd's sealer gets to
them, with progress shown.

  --grace=DURATION   seal windows that ended at least this long ago, by the
                     database's clock (default 2m, metricsd's too)

Shows progress, then a summary.
)";

int RunSealCommand(const SealArgs& args) {
  if (args.words.size() > 1 || args.help) {
    if (!args.help) {
      std::cerr << "metricsctl: unexpected argument \"" << args.words[1]
                << "\"\nRun \"metricsctl seal --help\" for usage.\n";
    } else {
      std::cout << kSealHelp;
    }
    return args.help ? 0 : 2;
  }
  storage::pg::SealOptions options;
  options.database_url = args.database_url;
  if (args.grace) options.grace = *args.grace;
  ProgressLine progress;
  options.progress = [&](const storage::pg::SealProgress& p) {
    progress.Show(absl::StrFormat("sealing: agent %d/%d (%s of trial %d), %d windows from %d "
                                  "raw rows, %.1f s",
                                  std::min(p.agents_done + 1, p.agents_total), p.agents_total,
                                  p.agent_id, p.trial_id, p.windows, p.rows, progress.Seconds()),
                  false);
  };
  std::signal(SIGINT, [](int) { seal_interrupted = 1; });
  std::signal(SIGTERM, [](int) { seal_interrupted = 1; });
  options.interrupted = [] { return seal_interrupted != 0; };
  options.vacuum_after = true;
  absl::StatusOr<storage::pg::SealSummary> summary = storage::pg::SealClosedWindows(options);
  progress.Finish();
  if (!summary.ok()) {
    std::cerr << "metricsctl: error: " << summary.status().message()
              << "\nWhat was sealed stays sealed; run it again to go on.\n";
    return 1;
  }
  std::cout << absl::StrFormat(
      "sealed %d windows of %d agents from %d raw rows (%d reports): %d bytes of values now %d "
      "(%.2f of them) in %.1f s\n",
      summary->windows, summary->agents, summary->rows, summary->reports, summary->raw_bytes,
      summary->sealed_bytes,
      summary->raw_bytes > 0 ? static_cast<double>(summary->sealed_bytes) / summary->raw_bytes : 0.0,
      progress.Seconds());
  if (summary->parts > 0) {
    std::cout << absl::StrFormat(
        "%d of the rows written are parts of windows too dense for one (at most %d KB held at "
        "once)\n",
        summary->parts, summary->peak_held_bytes >> 10);
  }
  if (summary->vacuumed) {
    std::cout << "vacuumed the profiling partition: the taken rows' space is reusable\n";
  }
  if (seal_interrupted) {
    std::cout << "interrupted: run it again to seal the rest\n";
    return 1;
  }
  return 0;
}

}  // namespace metrics::ctl
