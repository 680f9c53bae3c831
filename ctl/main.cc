// metricsctl: the operator CLI of the metrics service. Applies, reverts and
// lists schema migrations, rebuilds rollups from raw rows, applies raw-data
// retention, moves the legacy profiler's data into the new storage, and
// manages API tokens. Subcommands
// parse their own options so each has a --help of its own.
//
// Exit codes: 0 success, 1 the operation failed, 2 bad usage.

#include <atomic>
#include <csignal>
#include <cstdio>
#include <iostream>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/time.h"
#include "common/database_url.h"
#include "ctl/command_failure.h"
#include "ctl/progress_line.h"
#include "ctl/retention_command.h"
#include "ctl/seal_command.h"
#include "ctl/tokens_command.h"
#include "migrations/migration.h"
#include "migrations/migrator.h"
#include "storage/pg/jobs/legacy_move.h"
#include "storage/pg/jobs/rollup_rebuild.h"

namespace metrics::ctl {
namespace {

using migrations::LoadMigrationsFromDir;
using migrations::Migration;
using migrations::MigrationLabel;
using migrations::MigrationState;
using migrations::Migrator;
using migrations::MigratorOptions;

constexpr char kMainHelp[] = R"(Usage: metricsctl [options] <command> [command options]

The operator's tool for the profiling metrics service.

Commands:
  migrate up [--to N] [--lock-timeout D]
                          apply pending migrations, all or up to version N;
                          online where a table is large (docs: "Upgrades")
  migrate down [--to N]   revert the newest migration, or all newer than N
                          (--to 0 reverts every migration)
  migrate status          list applied and pending migrations
  rollups rebuild --trial N
                          recompute trial N's rollups from its raw rows
  legacy move [--dry-run] [--chunk-rows N]
                          move the old profiler's trial_profiler_metrics rows
                          into the new storage (lossless, idempotent,
                          resumable)
  retention apply --raw-retention=DURATION [--dry-run]
                          remove raw system rows older than DURATION ("30d");
                          their rollups stay
  seal [--grace=DURATION] seal every closed 10-minute window of raw system
                          rows now (metricsd does it every minute)
  tokens create --role=admin|viewer|reporter [--trial=ID] [--ttl=DURATION]
                [--name=NAME]
                          create an API token; prints it as the last line
  tokens list             list API tokens (never their secrets)
  tokens revoke ID        revoke an API token

Options (accepted anywhere on the line):
  --database-url URL      PostgreSQL to use, as a libpq URI or key=value string.
                          Default: $DATABASE_URL, else libpq's PG* variables
                          (PGHOST, PGPORT, PGUSER, PGDATABASE, PGPASSWORD).
  --migrations-dir DIR    use the migration files in DIR (NNNN_name.up.sql and
                          NNNN_name.down.sql) instead of the ones built in
  -h, --help              show help; "metricsctl migrate up --help" for one command

Exit status: 0 success, 1 failure, 2 bad usage.
)";

constexpr char kMigrateHelp[] = R"(Usage: metricsctl migrate <up|down|status> [options]

Manages the database schema. Each migration runs in its own transaction, or
in resumable steps that let writes go on, under a PostgreSQL advisory lock,
so concurrent runs (two operators, or several metricsd --migrate) apply each
migration exactly once: the later run waits, then finds nothing to do. A
database whose recorded migration differs from the file of the same number is
refused.

  up [--to N]     apply pending migrations, all or up to version N
  down [--to N]   revert the newest migration, or all newer than N (--to 0: all)
  status          list applied and pending migrations

Run "metricsctl --help" for the options that select the database.
)";

constexpr char kUpHelp[] = R"(Usage: metricsctl migrate up [--to N] [--lock-timeout DURATION] [--database-url URL] [--migrations-dir DIR]

Applies pending migrations in version order, printing each as it goes. With
--to N, stops after version N. Does nothing (and says so) when the schema is
current.

A migration runs in one transaction, or, where it changes a large table, in
steps that let the platform's writes go on (docs/operating.md, "Upgrades"):
indexes built concurrently, checks validated after they are in force. A run
that stopped halfway (an error, a kill, a lost connection) resumes at the step
it stopped in; "migrate status" shows such a migration as partial.

  --lock-timeout DURATION   the longest a step waits for a lock before it
                            steps back and tries again, so writes queued
                            behind it wait no longer (default 200ms); it
                            gives up after 10 minutes of retries
)";

constexpr char kDownHelp[] = R"(Usage: metricsctl migrate down [--to N] [--database-url URL] [--migrations-dir DIR]

Reverts applied migrations, newest first, each in its own transaction.
Without --to, reverts only the newest one; --to N reverts every migration
newer than N; --to 0 reverts all of them. Reverting drops the tables of those
migrations and every row in them.
)";

constexpr char kStatusHelp[] = R"(Usage: metricsctl migrate status [--database-url URL] [--migrations-dir DIR]

Prints a table of every migration: version, name, state (applied, pending,
partial: some of its steps done, CHANGED: its file differs from what was
applied, UNKNOWN: applied but not in the files) and when it was applied.
Exits 1 if any is CHANGED or UNKNOWN.
)";

constexpr char kRollupsHelp[] = R"(Usage: metricsctl rollups rebuild --trial N [--database-url URL]

Recomputes the stored rollups (the time buckets charts are drawn from) of
trial N from its raw rows in the metrics table, agent by agent, each in one
transaction. Ingest of the agent being rebuilt waits for it; other agents and
trials go on. Safe to run at any time and to run again; the result equals
what ingest keeps up to date. Shows progress, then a summary.
)";

constexpr char kLegacyHelp[] = R"(Usage: metricsctl legacy move [--dry-run] [--chunk-rows N] [--database-url URL]

Moves every row of the old profiler's table, trial_profiler_metrics, into the
new storage: system readings into metric group "system" (series registry and
rollups included, so the new API and the charts show them), timing and misc
readings into groups "timing" and "misc", each with its training batch index.
Every reading is moved; none is thinned. The legacy table is left as it is.

Names and units follow the new API: free_memory (GB) becomes memory_free in
bytes (x 10^9), net_throughput_sent/recv go from Gbit/s to bytes/s
(x 1.25 x 10^8); other names and values are kept. The legacy API (the
deprecated shims) converts back, so old clients see the old names and units.

Safe to run again and to interrupt: each legacy row is committed with a
record of it in the same transaction, so a second run changes nothing and a
run after Ctrl-C (or a killed process) skips what was committed and goes on.
Trials unknown to the service are registered as COMPLETED.

  --dry-run        count what would be moved and write nothing
  --chunk-rows N   legacy rows per round (default 200)

Shows progress, then a summary. Exit status: 0 when every row was moved (or
had been), 1 when some row could not be (each is listed, with why) or on an
error, 130 when interrupted.
)";

std::atomic<bool> interrupted{false};

struct Args {
  std::vector<std::string> words;  // the command words, in order
  std::string database_url;
  std::string migrations_dir;
  std::optional<int> to;
  std::optional<int> trial;
  std::optional<int> chunk_rows;
  std::optional<std::string> role;
  std::optional<std::string> ttl;
  std::optional<std::string> name;
  std::optional<std::string> raw_retention;
  std::optional<absl::Duration> lock_timeout;
  std::optional<absl::Duration> grace;
  bool dry_run = false;
  bool help = false;
};

int UsageError(absl::string_view message) {
  std::cerr << "metricsctl: " << message
            << "\nRun \"metricsctl --help\" for usage.\n";
  return 2;
}

// A positive int option's value, or the error to say.
std::string ParseCount(const std::string& name, const std::string& value,
                       int min, int max, absl::string_view meaning,
                       std::optional<int>& out) {
  int n = 0;
  if (!absl::SimpleAtoi(value, &n) || n < min || n > max) {
    return absl::StrCat(name, " ", value, ": must be ", meaning);
  }
  out = n;
  return "";
}

// The options that take a value: each sets its field of Args and returns an
// error message, or "" when the value is good.
struct ValueOption {
  const char* name;
  std::string (*set)(const std::string& value, Args& args);
};

constexpr ValueOption kValueOptions[] = {
    {"--database-url",
     [](const std::string& v, Args& a) {
       a.database_url = v;
       return std::string();
     }},
    {"--migrations-dir",
     [](const std::string& v, Args& a) {
       a.migrations_dir = v;
       return std::string();
     }},
    {"--role", [](const std::string& v, Args& a) {
       a.role = v;
       return std::string();
     }},
    {"--ttl", [](const std::string& v, Args& a) {
       a.ttl = v;
       return std::string();
     }},
    {"--name", [](const std::string& v, Args& a) {
       a.name = v;
       return std::string();
     }},
    {"--raw-retention",
     [](const std::string& v, Args& a) {
       a.raw_retention = v;
       return std::string();
     }},
    {"--trial",
     [](const std::string& v, Args& a) {
       return ParseCount("--trial", v, 1, std::numeric_limits<int>::max(),
                         "a trial id (> 0)", a.trial);
     }},
    {"--chunk-rows",
     [](const std::string& v, Args& a) {
       return ParseCount("--chunk-rows", v, 1, 100000,
                         "a number from 1 to 100000", a.chunk_rows);
     }},
    {"--lock-timeout",
     [](const std::string& v, Args& a) {
       absl::Duration d;
       if (!absl::ParseDuration(v, &d) || d < absl::Milliseconds(1) ||
           d > absl::Hours(1)) {
         return absl::StrCat("--lock-timeout ", v,
                             ": must be a duration from 1ms to 1h (\"200ms\")");
       }
       a.lock_timeout = d;
       return std::string();
     }},
    {"--grace",
     [](const std::string& v, Args& a) {
       absl::Duration d;
       if (!absl::ParseDuration(v, &d) || d < absl::ZeroDuration() || d > absl::Hours(24 * 366)) {
         return absl::StrCat("--grace ", v, ": must be a duration from 0s to 366 days (\"2m\")");
       }
       a.grace = d;
       return std::string();
     }},
    {"--to",
     [](const std::string& v, Args& a) {
       return ParseCount("--to", v, 0, std::numeric_limits<int>::max(),
                         "a migration version (0 or more)", a.to);
     }},
};

// Parses options anywhere on the line; returns an error message or "".
std::string Parse(int argc, char** argv, Args& args) {
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "-h" || arg == "--help") {
      args.help = true;
      continue;
    }
    if (arg == "--dry-run") {
      args.dry_run = true;
      continue;
    }
    if (arg.rfind("--", 0) != 0) {
      args.words.push_back(arg);
      continue;
    }
    std::string name = arg, value;
    bool has_value = false;
    if (size_t eq = arg.find('='); eq != std::string::npos) {
      name = arg.substr(0, eq);
      value = arg.substr(eq + 1);
      has_value = true;
    }
    const ValueOption* option = nullptr;
    for (const ValueOption& o : kValueOptions) {
      if (name == o.name) option = &o;
    }
    if (option == nullptr) return absl::StrCat("unknown option ", name);
    if (!has_value) {
      if (i + 1 >= argc) return absl::StrCat(name, " needs a value");
      value = argv[++i];
    }
    if (std::string error = option->set(value, args); !error.empty()) {
      return error;
    }
  }
  return "";
}

std::string Millis(absl::Duration d) {
  return absl::StrCat(absl::ToInt64Milliseconds(d), " ms");
}

void PrintStatusTable(const std::vector<MigrationState>& states) {
  std::printf("%-8s %-32s %-8s %s\n", "VERSION", "NAME", "STATE",
              "APPLIED AT");
  int applied = 0, pending = 0, broken = 0;
  for (const MigrationState& s : states) {
    std::string when =
        s.applied_at.has_value()
            ? absl::FormatTime("%Y-%m-%d %H:%M:%S UTC", *s.applied_at,
                               absl::UTCTimeZone())
        : s.steps_done > 0
            ? absl::StrCat(s.steps_done, " of ", s.steps, " steps done")
            : "-";
    const std::string state =
        s.state == MigrationState::State::kPending && s.steps_done > 0
            ? "partial"
            : std::string(StateName(s.state));
    std::printf("%-8s %-32s %-8s %s\n", absl::StrFormat("%04d", s.version).c_str(),
                s.name.c_str(), state.c_str(), when.c_str());
    switch (s.state) {
      case MigrationState::State::kApplied:
        ++applied;
        break;
      case MigrationState::State::kPending:
        ++pending;
        break;
      default:
        ++broken;
    }
  }
  std::printf("%d applied, %d pending", applied, pending);
  if (broken > 0) std::printf(", %d CHANGED or UNKNOWN", broken);
  std::printf("\n");
}

int Rollups(const Args& args) {
  const std::vector<std::string>& w = args.words;
  if (w.size() < 2 || w[1] != "rebuild") {
    std::cout << kRollupsHelp;
    return args.help ? 0 : 2;
  }
  if (args.help) {
    std::cout << kRollupsHelp;
    return 0;
  }
  if (w.size() > 2) {
    return UsageError(absl::StrCat("unexpected argument \"", w[2], "\""));
  }
  if (!args.trial) return UsageError("rollups rebuild needs --trial N");
  ProgressLine progress;
  auto show = [&](const storage::pg::RebuildProgress& p) {
    const int percent = p.reports_total > 0
                            ? static_cast<int>(100 * p.reports_done / p.reports_total)
                            : 100;
    progress.Show(
        absl::StrFormat(
            "rebuilding trial %d: agent %d/%d (%s), %d/%d reports (%d%%), %.1f s",
            *args.trial, std::min(p.agents_done + 1, p.agents_total),
            p.agents_total, p.agent_id, p.reports_done, p.reports_total, percent,
            progress.Seconds()),
        p.reports_done == p.reports_total);
  };
  absl::StatusOr<storage::pg::RebuildSummary> summary =
      storage::pg::RebuildRollups(common::ResolveDatabaseUrl(args.database_url),
                                  *args.trial, show);
  progress.Finish();
  if (!summary.ok()) return Fail(summary.status());
  std::cout << absl::StrFormat(
      "rebuilt %d rollup buckets of trial %d (%d agents) from %d reports "
      "(%d values) in %.1f s\n",
      summary->buckets, *args.trial, summary->agents, summary->reports,
      summary->samples, progress.Seconds());
  return 0;
}

int Legacy(const Args& args) {
  const std::vector<std::string>& w = args.words;
  if (w.size() < 2 || w[1] != "move" || args.help) {
    std::cout << kLegacyHelp;
    return args.help ? 0 : 2;
  }
  if (w.size() > 2) {
    return UsageError(absl::StrCat("unexpected argument \"", w[2], "\""));
  }
  storage::pg::LegacyMoveOptions options;
  options.database_url = common::ResolveDatabaseUrl(args.database_url);
  options.dry_run = args.dry_run;
  if (args.chunk_rows) options.rows_per_chunk = *args.chunk_rows;
  // Ctrl-C finishes the round in flight, then stops: what is committed
  // stays, and the next run goes on from there.
  std::signal(SIGINT, [](int) { interrupted = true; });
  std::signal(SIGTERM, [](int) { interrupted = true; });
  options.interrupted = [] { return interrupted.load(); };
  ProgressLine progress;
  options.progress = [&](const storage::pg::LegacyMoveProgress& p) {
    const int percent = p.rows_total > 0
                            ? static_cast<int>(100 * p.rows_done / p.rows_total)
                            : 100;
    constexpr int kWidth = 30;
    const int filled = percent * kWidth / 100;
    progress.Show(absl::StrFormat(
                      "[%s%s] %3d%%  %d/%d rows, %d readings moved, %.1f s",
                      std::string(filled, '#'), std::string(kWidth - filled, ' '),
                      percent, p.rows_done, p.rows_total, p.readings_done,
                      progress.Seconds()),
                  p.rows_done == p.rows_total);
  };
  absl::StatusOr<storage::pg::LegacyMoveSummary> summary =
      storage::pg::MoveLegacyProfilerData(options);
  progress.Finish();
  if (!summary.ok()) {
    std::cerr << "metricsctl: error: " << summary.status().message()
              << "\nWhat was committed stays; run it again to go on.\n";
    return 1;
  }
  const storage::pg::LegacyMoveSummary& s = *summary;
  const double seconds = progress.Seconds();
  if (args.dry_run) {
    std::cout << absl::StrFormat(
        "dry run: %d legacy rows of %d trials; %d rows (%d readings) to move, "
        "%d moved before (at least in part); %d trials to register; "
        "nothing written\n",
        s.rows, s.trials, s.rows_moved, s.readings, s.rows_already,
        s.trials_created);
    return 0;
  }
  std::cout << absl::StrFormat(
      "%s: %d legacy rows of %d trials looked at in %.1f s: %d moved "
      "(%d readings), %d moved before, %d not movable; %d trials registered\n",
      s.interrupted ? "interrupted" : "done", s.rows, s.trials, seconds,
      s.rows_moved, s.readings, s.rows_already, s.rows_refused,
      s.trials_created);
  if (s.readings_not_finite > 0) {
    std::cout << s.readings_not_finite
              << " readings were NaN or infinite: the new storage holds "
                 "finite numbers only, so they were not stored\n";
  }
  for (const std::string& refusal : s.refusals) {
    std::cout << "not moved: " << refusal << "\n";
  }
  if (s.rows_refused > static_cast<int64_t>(s.refusals.size())) {
    std::cout << "... and " << s.rows_refused - s.refusals.size()
              << " more rows not moved\n";
  }
  if (s.interrupted) {
    std::cout << "run \"metricsctl legacy move\" again to go on\n";
    return 130;
  }
  return s.rows_refused > 0 ? 1 : 0;
}

int Migrate(const Args& args) {
  const std::vector<std::string>& w = args.words;
  if (w.size() == 1) {
    std::cout << kMigrateHelp;
    return args.help ? 0 : 2;
  }
  const std::string& sub = w[1];
  const char* help = sub == "up"       ? kUpHelp
                     : sub == "down"   ? kDownHelp
                     : sub == "status" ? kStatusHelp
                                       : nullptr;
  if (help == nullptr) {
    return UsageError(absl::StrCat("unknown command \"migrate ", sub, "\""));
  }
  if (args.help) {
    std::cout << help;
    return 0;
  }
  if (w.size() > 2) {
    return UsageError(absl::StrCat("unexpected argument \"", w[2], "\""));
  }
  if (sub == "status" && args.to.has_value()) {
    return UsageError("--to does not apply to \"migrate status\"");
  }
  if (sub != "up" && args.lock_timeout.has_value()) {
    return UsageError("--lock-timeout applies to \"migrate up\" only");
  }

  MigratorOptions options;
  options.database_url = common::ResolveDatabaseUrl(args.database_url);
  if (!args.migrations_dir.empty()) {
    absl::StatusOr<std::vector<Migration>> loaded =
        LoadMigrationsFromDir(args.migrations_dir);
    if (!loaded.ok()) return Fail(loaded.status());
    options.migrations = *std::move(loaded);
  }
  options.on_progress = [](absl::string_view event) {
    std::cout << event << "..." << std::endl;
  };
  if (args.lock_timeout.has_value()) options.lock_timeout = *args.lock_timeout;
  absl::StatusOr<std::unique_ptr<Migrator>> migrator =
      Migrator::Create(std::move(options));
  if (!migrator.ok()) return Fail(migrator.status());

  if (sub == "status") {
    absl::StatusOr<std::vector<MigrationState>> states = (*migrator)->Status();
    if (!states.ok()) return Fail(states.status());
    PrintStatusTable(*states);
    for (const MigrationState& s : *states) {
      if (s.state == MigrationState::State::kChanged ||
          s.state == MigrationState::State::kUnknown) {
        return 1;
      }
    }
    return 0;
  }
  const bool up = sub == "up";
  absl::StatusOr<std::vector<MigrationState>> done =
      up ? (*migrator)->Up(args.to) : (*migrator)->Down(args.to);
  if (!done.ok()) return Fail(done.status());
  for (const MigrationState& s : *done) {
    std::cout << (up ? "applied " : "reverted ") << MigrationLabel(s.version, s.name) << " ("
              << Millis(*s.took) << ")\n";
  }
  if (done->empty()) {
    std::cout << (up ? "nothing to apply: the schema is current\n"
                     : "nothing to revert\n");
  } else {
    std::cout << (up ? "applied " : "reverted ") << done->size()
              << " migration(s)\n";
  }
  return 0;
}

int Retention(const Args& args) {
  return RunRetentionCommand({args.words,
                              common::ResolveDatabaseUrl(args.database_url),
                              args.raw_retention, args.dry_run, args.help});
}

int Seal(const Args& args) {
  return RunSealCommand(
      {args.words, common::ResolveDatabaseUrl(args.database_url), args.grace, args.help});
}

int Tokens(const Args& args) {
  return RunTokensCommand({args.words,
                           common::ResolveDatabaseUrl(args.database_url),
                           args.role, args.trial, args.ttl, args.name,
                           args.help});
}

// The commands, by their first word.
struct Command {
  const char* name;
  int (*run)(const Args& args);
};

constexpr Command kCommands[] = {
    {"migrate", Migrate}, {"rollups", Rollups}, {"retention", Retention},
    {"legacy", Legacy},   {"tokens", Tokens},     {"seal", Seal},
};

int Run(int argc, char** argv) {
  Args args;
  if (std::string error = Parse(argc, argv, args); !error.empty()) {
    return UsageError(error);
  }
  if (args.words.empty()) {
    std::cout << kMainHelp;
    return args.help ? 0 : 2;
  }
  for (const Command& command : kCommands) {
    if (args.words[0] == command.name) return command.run(args);
  }
  return UsageError(absl::StrCat("unknown command \"", args.words[0], "\""));
}

}  // namespace
}  // namespace metrics::ctl

int main(int argc, char** argv) { return metrics::ctl::Run(argc, argv); }
