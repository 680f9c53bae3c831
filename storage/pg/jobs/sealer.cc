#include "storage/pg/jobs/sealer.h"

#include <pqxx/binarystring>
#include <pqxx/connection>
#include <pqxx/nontransaction>
#include <pqxx/result>
#include <pqxx/transaction>

#include <algorithm>
#include <climits>
#include <map>
#include <optional>
#include <memory>
#include <stdexcept>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "storage/format/packed_report.h"
#include "storage/format/sealed_window.h"
#include "storage/pg/connection.h"
#include "storage/pg/jobs/sealed_rollups.h"
#include "storage/pg/lock_keys.h"
#include "storage/pg/pg_errors.h"
#include "storage/pg/reads/raw_values.h"
#include "storage/pg/sql_arrays.h"
#include "storage/pg/sql_time.h"
#include "storage/rollup.h"

namespace metrics::storage::pg {

namespace {

constexpr int64_t kWindowUs = int64_t{kSealedWindowSeconds} * 1000000;
// Raw rows a fetch brings: a page of packed values as hex, some 250 KB.
constexpr int kRowsPerFetch = 1000;

// Rows of an agent of one form with end_time in [from, to): each form over
// its index of system rows. The arguments are SQL: parameters or literals.
std::string RowsSql(absl::string_view columns, absl::string_view form, absl::string_view trial,
                    absl::string_view agent, absl::string_view from, absl::string_view to) {
  return absl::StrCat("SELECT ", columns, " FROM metrics_profiling WHERE trial_id = ", trial,
                      " AND ", SystemRowsOfAgentSql(agent), " AND ", form, " AND end_time >= ",
                      TimestampFromMicrosSql(from), " AND end_time < ",
                      TimestampFromMicrosSql(to));
}
std::string RowsSql(absl::string_view columns, absl::string_view form) {
  return RowsSql(columns, form, "$1", "$2", "$3", "$4");
}

// Agents with raw rows before $1: one probe of the raw rows' index per
// (trial, agent hash), skipping from each to the next (PostgreSQL's
// B-trees have no skip scan of their own), so a pass costs two index
// descents an agent however many rows wait. Agents whose ids share a hash
// are found one a pass, the one with the oldest row first.
const char* const kAgentsToSealSql = R"sql(
WITH RECURSIVE agents (trial_id, h) AS (
  (SELECT trial_id, hashtext(agent_id) FROM metrics_profiling
   WHERE metric_group = 'system' AND packed_values IS NOT NULL
   ORDER BY 1, 2 LIMIT 1)
  UNION ALL
  SELECT n.trial_id, n.h FROM agents a CROSS JOIN LATERAL (
    SELECT trial_id, hashtext(agent_id) AS h FROM metrics_profiling
    WHERE metric_group = 'system' AND packed_values IS NOT NULL
      AND (trial_id, hashtext(agent_id)) > (a.trial_id, a.h)
    ORDER BY 1, 2 LIMIT 1) n)
SELECT a.trial_id, o.agent_id FROM agents a CROSS JOIN LATERAL (
  SELECT agent_id FROM metrics_profiling
  WHERE trial_id = a.trial_id AND hashtext(agent_id) = a.h
    AND metric_group = 'system' AND packed_values IS NOT NULL
    AND end_time < timestamptz 'epoch' + $1 * interval '1 microsecond'
  ORDER BY end_time LIMIT 1) o
)sql";

struct Counts {
  int64_t windows = 0, rows = 0, reports = 0, raw_bytes = 0, sealed_bytes = 0, parts = 0,
          peak_held = 0;
  void Add(const Counts& c) {
    windows += c.windows;
    rows += c.rows;
    reports += c.reports;
    raw_bytes += c.raw_bytes;
    sealed_bytes += c.sealed_bytes;
    parts += c.parts;
    peak_held = std::max(peak_held, c.peak_held);
  }
};

// A report to seal and its place in storage order.
struct Keyed {
  std::tuple<int64_t, int64_t, int32_t> key;  // (time, row id, place)
  WindowReport report;
  bool pending = false;  // from a raw row not in the rollups yet
};

// What sealing a report of `values` values holds, about: the report as read
// (and moved into its window's order), its share of SealWindow's columns
// (a place and a value each), of the sealed bytes, of the ctids of the rows
// taken and of the rollups' list.
int64_t HeldBytes(size_t values) {
  return static_cast<int64_t>(sizeof(Keyed) + 64 + values * (sizeof(SeriesValue) + 20));
}

// The rows of one window that one transaction seals.
struct WindowPart {
  std::vector<Keyed> reports;
  int64_t first_id = INT64_MAX;  // the smallest id of the rows it takes
  void Note(int64_t id) { first_id = std::min(first_id, id); }
};

// Seals, in one transaction, the agent's oldest raw rows before `until_us`:
// whole windows (at most options.windows_per_transaction) while they fit
// options.memory_budget_bytes, and where one does not, its first part.
// Returns the rows written: 0 when nothing was left. Throws libpqxx's
// exceptions, and std::runtime_error for rows that do not decode or changed
// meanwhile.
int64_t SealSome(pqxx::connection& conn, int32_t trial, const std::string& agent,
                 int64_t until_us, const SealOptions& options, Counts& total) {
  Counts counts;  // added to `total` once committed
  pqxx::work tx(conn);
  tx.exec_params("SELECT pg_advisory_xact_lock($1)", RollupLockKey(trial, agent));
  // Read after the lock: what another sealer did before is committed.
  const pqxx::result oldest =
      tx.exec_params(absl::StrCat(RowsSql(EpochMicrosSql("end_time"), "packed_values IS NOT NULL"),
                                  " ORDER BY end_time LIMIT 1"),
                     trial, agent, kYearOneMicros, until_us);
  if (oldest.empty()) return 0;
  const int64_t from = AlignDown(oldest[0][0].as<int64_t>(), kWindowUs);
  const int64_t max_windows = std::max(1, options.windows_per_transaction);
  const int64_t to = until_us - from > max_windows * kWindowUs ? from + max_windows * kWindowUs
                                                               : until_us;
  const int64_t budget = std::max<int64_t>(options.memory_budget_bytes, 1);

  // The raw rows in order of time and ingest, a page at a time, until the
  // budget is reached: the rows after it wait for the next transaction.
  // DECLARE takes no parameters: the numbers are written out, the agent
  // quoted.
  tx.exec(absl::StrCat(
      "DECLARE seal_rows NO SCROLL CURSOR FOR ",
      RowsSql(absl::StrCat("ctid, id, ", EpochMicrosSql("end_time"), ", total_batches, packed_values"),
              "packed_values IS NOT NULL", absl::StrCat(trial), tx.quote(agent),
              absl::StrCat(from), absl::StrCat(to)),
      " ORDER BY end_time, id"));
  const std::string fetch = absl::StrCat("FETCH ", kRowsPerFetch, " FROM seal_rows");
  std::vector<std::string> gone;                // ctids of the rows taken
  std::map<int64_t, WindowPart> windows;        // by window start
  int64_t held = 0;
  bool full = false;
  while (!full) {
    const pqxx::result page = tx.exec(fetch);
    for (const pqxx::row& row : page) {
      const int64_t id = row[1].as<int64_t>();
      const int64_t t = row[2].as<int64_t>();
      const std::string packed = DecodeByteaHex(row[4].c_str());
      absl::StatusOr<std::vector<SeriesValue>> values = UnpackReport(packed);
      if (!values.ok()) {
        throw std::runtime_error(absl::StrCat("raw row ", id, ": ", values.status().message()));
      }
      std::optional<int32_t> batch;
      if (!row[3].is_null()) batch = row[3].as<int32_t>();
      counts.raw_bytes += static_cast<int64_t>(packed.size());
      held += HeldBytes(values->size());
      WindowPart& part = windows[AlignDown(t, kWindowUs)];
      part.reports.push_back(
          {{t, id, 0}, WindowReport(t, *std::move(values), batch), IsPendingReport(packed)});
      part.Note(id);
      gone.push_back(row[0].as<std::string>());
      ++counts.rows;
      if (held >= budget) {
        full = true;
        break;
      }
    }
    if (page.size() < static_cast<size_t>(kRowsPerFetch)) break;
  }
  tx.exec("CLOSE seal_rows");
  const int64_t taken = static_cast<int64_t>(gone.size());
  if (taken == 0) return 0;  // taken meanwhile by raw retention

  // The windows' earlier seals: each window's smallest joins it while it
  // fits the budget (a window of a report a second stays one row however
  // late its rows come); the others, and a larger one, stay parts of
  // their own. The count is read from the first bytes, not the whole row.
  const int64_t held_per_report = held / std::max<int64_t>(taken, 1);
  const int64_t last_window = windows.rbegin()->first;
  struct Candidate {
    std::string ctid;
    int64_t id = 0, reports = INT64_MAX;
  };
  std::map<int64_t, Candidate> smallest;  // by window start
  int64_t earlier_rows = 0;
  for (const pqxx::row& row : tx.exec_params(
           RowsSql(absl::StrCat("ctid, id, ", EpochMicrosSql("end_time"),
                                ", substring(sealed_values from 1 for 11)"),
                   "packed_values IS NULL AND sealed_values IS NOT NULL"),
           trial, agent, from, last_window + kWindowUs)) {
    const int64_t window = row[2].as<int64_t>();
    if (windows.count(window) == 0) continue;  // no rows for it now
    ++earlier_rows;
    absl::StatusOr<int64_t> reports = SealedReportCount(DecodeByteaHex(row[3].c_str()));
    if (!reports.ok()) {
      throw std::runtime_error(
          absl::StrCat("sealed row ", row[1].as<int64_t>(), ": ", reports.status().message()));
    }
    Candidate& c = smallest[window];
    if (*reports < c.reports) c = {row[0].as<std::string>(), row[1].as<int64_t>(), *reports};
  }
  for (const auto& [window, candidate] : smallest) {
    if (held + candidate.reports * held_per_report > budget) continue;
    const pqxx::result row = tx.exec_params(
        "SELECT sealed_values FROM metrics_profiling WHERE ctid = $1::tid", candidate.ctid);
    if (row.empty()) {
      throw std::runtime_error(absl::StrCat("sealed row ", candidate.id, " went meanwhile"));
    }
    absl::StatusOr<std::vector<WindowReport>> sealed =
        UnsealWindow(DecodeByteaHex(row[0][0].c_str()));
    if (!sealed.ok()) {
      throw std::runtime_error(
          absl::StrCat("sealed row ", candidate.id, ": ", sealed.status().message()));
    }
    WindowPart& part = windows[window];
    for (size_t k = 0; k < sealed->size(); ++k) {
      WindowReport& r = (*sealed)[k];
      held += HeldBytes(r.values.size());
      part.reports.push_back({{r.time_us, candidate.id, static_cast<int32_t>(k)}, std::move(r)});
    }
    part.Note(candidate.id);
    gone.push_back(candidate.ctid);
    --earlier_rows;
  }
  counts.peak_held = held;

  std::vector<int64_t> ids, starts;
  std::vector<std::string> blobs;
  std::vector<std::vector<WindowReport>> sealed(windows.size());
  std::vector<const WindowReport*> for_rollups;  // in storage order
  size_t w = 0;
  for (auto& [window, part] : windows) {
    std::vector<Keyed>& reports = part.reports;
    std::sort(reports.begin(), reports.end(),
              [](const Keyed& a, const Keyed& b) { return a.key < b.key; });
    std::vector<WindowReport>& ordered = sealed[w++];
    ordered.reserve(reports.size());
    for (Keyed& k : reports) ordered.push_back(std::move(k.report));
    for (size_t k = 0; k < reports.size(); ++k) {
      if (reports[k].pending) for_rollups.push_back(&ordered[k]);
    }
    counts.reports += static_cast<int64_t>(ordered.size());
    ids.push_back(part.first_id);
    starts.push_back(window);
    blobs.push_back(SealWindow(ordered));
    counts.sealed_bytes += static_cast<int64_t>(blobs.back().size());
  }
  // A window whose earlier rows stay, or whose rows this transaction took
  // only in part, gets a row beside another.
  counts.parts = earlier_rows + (full ? 1 : 0);
  // Out first, then in: the new rows reuse the smallest id they hold.
  const pqxx::result deleted = tx.exec_params(
      "DELETE FROM metrics_profiling WHERE ctid = ANY($1::tid[])", TextArray(gone));
  if (deleted.affected_rows() != gone.size()) {
    throw std::runtime_error(absl::StrCat(
        "agent ", agent, " of trial ", trial, ": ", gone.size() - deleted.affected_rows(),
        " of the rows to seal went meanwhile (raw retention?); sealed on the next pass"));
  }
  tx.exec_params(
      "INSERT INTO metrics_profiling (id, trial_id, partition_type, metric_group, agent_id, "
      "end_time, sealed_values) "
      "SELECT k.id, $1, 'PROFILING', 'system', $2, "
      "timestamptz 'epoch' + k.us * interval '1 microsecond', k.sealed "
      "FROM unnest($3::bigint[], $4::bigint[], $5::bytea[]) AS k(id, us, sealed)",
      trial, agent, IntArray(ids), IntArray(starts), pqxx::binarystring(ByteaArrayBinary(blobs)));
  // The raw rows' values go into the rollups as they leave the rows that
  // marked them as not there yet: once, in this transaction.
  AddToRollups(tx, trial, agent, for_rollups);
  tx.commit();
  counts.windows = static_cast<int64_t>(blobs.size());
  total.Add(counts);
  return static_cast<int64_t>(blobs.size());
}

// Seals each of `agents`' raw rows before `until_us`, a transaction at a
// time, on `conn`; with `max_rows`, only until that many are taken (an agent
// still reporting would otherwise be chased for ever).
absl::Status SealAgents(pqxx::connection& conn, const SealOptions& options,
                        const std::vector<std::pair<int32_t, std::string>>& agents,
                        int64_t until_us, Counts& counts,
                        std::optional<int64_t> max_rows = std::nullopt) {
  SealProgress progress;
  progress.agents_total = static_cast<int>(agents.size());
  for (const auto& [trial, agent] : agents) {
    progress.trial_id = trial;
    progress.agent_id = agent;
    for (;;) {
      if (options.interrupted && options.interrupted()) break;
      int64_t sealed = 0;
      RETURN_IF_ERROR(GuardPg(absl::StrCat("sealing windows of agent ", agent, " of trial ", trial),
                              [&, trial = trial, agent = agent]() -> absl::Status {
                                sealed = SealSome(conn, trial, agent, until_us, options, counts);
                                return absl::OkStatus();
                              }));
      progress.windows = counts.windows;
      progress.rows = counts.rows;
      if (options.progress) options.progress(progress);
      if (sealed == 0 || (max_rows.has_value() && counts.rows >= *max_rows)) break;
    }
    ++progress.agents_done;
  }
  return absl::OkStatus();
}

SealSummary Summarize(const Counts& counts, int agents) {
  SealSummary summary;
  summary.agents = agents;
  summary.windows = counts.windows;
  summary.rows = counts.rows;
  summary.reports = counts.reports;
  summary.raw_bytes = counts.raw_bytes;
  summary.sealed_bytes = counts.sealed_bytes;
  summary.parts = counts.parts;
  summary.peak_held_bytes = counts.peak_held;
  return summary;
}

}  // namespace

absl::StatusOr<SealSummary> SealClosedWindows(const SealOptions& options) {
  ASSIGN_OR_RETURN(std::unique_ptr<pqxx::connection> conn,
                   Connect(options.database_url, options.application_name));
  int64_t until_us = 0;
  std::vector<std::pair<int32_t, std::string>> agents;
  RETURN_IF_ERROR(GuardPg("finding windows to seal", [&]() -> absl::Status {
    pqxx::nontransaction tx(*conn);
    // The database's clock, the same for every server.
    until_us = AlignDown(
        tx.exec_params1(absl::StrCat("SELECT ", EpochMicrosSql("now() - $1::bigint * interval "
                                                               "'1 microsecond'")),
                        absl::ToInt64Microseconds(options.grace))[0]
            .as<int64_t>(),
        kWindowUs);
    for (const pqxx::row& row : tx.exec_params(kAgentsToSealSql, until_us)) {
      agents.emplace_back(row[0].as<int32_t>(), row[1].as<std::string>());
    }
    return absl::OkStatus();
  }));
  Counts counts;
  RETURN_IF_ERROR(SealAgents(*conn, options, agents, until_us, counts));
  SealSummary summary = Summarize(counts, static_cast<int>(agents.size()));
  if (options.vacuum_after && counts.rows > 0) {
    RETURN_IF_ERROR(GuardPg("vacuuming the profiling partition", [&]() -> absl::Status {
      pqxx::nontransaction tx(*conn);
      tx.exec("VACUUM metrics_profiling");
      return absl::OkStatus();
    }));
    summary.vacuumed = true;
  }
  return summary;
}

namespace {

// SealAgent on a connection of the caller's.
absl::StatusOr<SealSummary> SealAgentOn(pqxx::connection& conn, const SealOptions& options,
                                        int32_t trial, const std::string& agent,
                                        int64_t max_rows) {
  Counts counts;
  RETURN_IF_ERROR(SealAgents(conn, options, {{trial, agent}}, kYearTenThousandMicros, counts,
                             max_rows));
  return Summarize(counts, counts.rows > 0 ? 1 : 0);
}

}  // namespace

absl::StatusOr<SealSummary> SealAgent(const SealOptions& options, int32_t trial,
                                      const std::string& agent, int64_t max_rows) {
  ASSIGN_OR_RETURN(std::unique_ptr<pqxx::connection> conn,
                   Connect(options.database_url, options.application_name));
  return SealAgentOn(*conn, options, trial, agent, max_rows);
}

SealerLoop::SealerLoop(SealOptions options, absl::Duration every,
                       std::shared_ptr<SealTrigger> trigger,
                       std::function<void(const std::string&)> log)
    : trigger_(std::move(trigger)) {
  options.interrupted = [this] { return stop_.HasBeenNotified(); };
  thread_ = std::thread([this, options = std::move(options), every, log = std::move(log)] {
    Run(options, every, log);
  });
}

void SealerLoop::Run(SealOptions options, absl::Duration every,
                     const std::function<void(const std::string&)>& log) {
  // Each transaction's rows, told to the trigger (progress counts them
  // from the pass's start).
  int64_t rows_told = 0;
  if (trigger_ != nullptr) {
    options.progress = [this, &rows_told](const SealProgress& p) {
      trigger_->Sealed(p.trial_id, p.agent_id, p.rows - rows_told);
      rows_told = p.rows;
    };
  }
  SealOptions early = options;
  early.progress = nullptr;
  std::unique_ptr<pqxx::connection> early_conn;
  Counts early_counts;
  int64_t early_seals = 0;
  absl::Time next_pass = absl::InfinitePast();
  while (!stop_.HasBeenNotified()) {
    if (absl::Now() < next_pass) {
      if (trigger_ == nullptr) {
        stop_.WaitForNotificationWithTimeout(next_pass - absl::Now());
        continue;
      }
      const std::optional<SealTrigger::Due> due = trigger_->NextDue(next_pass);
      if (!due.has_value()) continue;
      const auto& [trial, agent] = due->agent;
      // Early seals come several a second from a dense agent: one
      // connection for all of them, made again after a failure.
      if (early_conn == nullptr) {
        absl::StatusOr<std::unique_ptr<pqxx::connection>> conn =
            Connect(early.database_url, early.application_name);
        if (!conn.ok()) {
          log(absl::StrCat("sealer: early seal: ", conn.status().message()));
          continue;
        }
        early_conn = *std::move(conn);
      }
      absl::StatusOr<SealSummary> seal =
          SealAgentOn(*early_conn, early, trial, agent, due->waiting);
      if (!seal.ok()) {
        early_conn.reset();
        log(absl::StrCat("sealer: early seal: ", seal.status().message()));
        continue;
      }
      trigger_->Sealed(trial, agent, std::max(seal->rows, due->waiting));
      ++early_seals;
      early_counts.Add({seal->windows, seal->rows, seal->reports, seal->raw_bytes,
                        seal->sealed_bytes, seal->parts, seal->peak_held_bytes});
      continue;
    }
    rows_told = 0;
    absl::StatusOr<SealSummary> pass = SealClosedWindows(options);
    next_pass = absl::Now() + every;
    if (!pass.ok()) {
      log(absl::StrCat("sealer: ", pass.status().message(), "; trying again in ",
                       absl::FormatDuration(every)));
    } else if (pass->windows > 0 || early_seals > 0) {
      std::string line = absl::StrCat("sealer: sealed ", pass->windows, " windows of ",
                                      pass->agents, " agents (", pass->rows, " raw rows, ",
                                      pass->raw_bytes, " bytes of values, now ",
                                      pass->sealed_bytes, ")");
      if (early_seals > 0) {
        absl::StrAppend(&line, "; since the last pass, ", early_seals,
                        " early seals of agents with many rows waiting (", early_counts.rows,
                        " raw rows, the largest transaction holding ",
                        early_counts.peak_held >> 10, " KB)");
      }
      log(line);
      early_seals = 0;
      early_counts = Counts();
    }
  }
}

SealerLoop::~SealerLoop() {
  stop_.Notify();
  if (trigger_ != nullptr) trigger_->Stop();
  thread_.join();
}

}  // namespace metrics::storage::pg
