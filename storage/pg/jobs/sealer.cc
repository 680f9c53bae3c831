#include "storage/pg/jobs/sealer.h"

#include <pqxx/binarystring>
#include <pqxx/connection>
#include <pqxx/nontransaction>
#include <pqxx/result>
#include <pqxx/transaction>

#include <algorithm>
#include <map>
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

// Rows of an agent (trial $1, agent $2) of one form with end_time in
// [$3, $4): each form over its index of system rows.
std::string RowsSql(absl::string_view columns, absl::string_view form) {
  return absl::StrCat("SELECT ", columns, " FROM metrics_profiling WHERE trial_id = $1 AND ",
                      SystemRowsOfAgentSql("$2"), " AND ", form, " AND end_time >= ",
                      TimestampFromMicrosSql("$3"), " AND end_time < ",
                      TimestampFromMicrosSql("$4"));
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
  int64_t windows = 0, rows = 0, reports = 0, raw_bytes = 0, sealed_bytes = 0;
};

// A report to seal and its place in storage order.
struct Keyed {
  std::tuple<int64_t, int64_t, int32_t> key;  // (time, row id, place)
  WindowReport report;
  bool pending = false;  // from a raw row not in the rollups yet
};

// Seals the agent's oldest closed windows with raw rows (at most
// `max_windows`, before `until_us`) in one transaction. Returns the
// windows sealed: 0 when none was left. Throws libpqxx's exceptions, and
// std::runtime_error for rows that do not decode or changed meanwhile.
int64_t SealSome(pqxx::connection& conn, int32_t trial, const std::string& agent,
                 int64_t until_us, int max_windows, Counts& total) {
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
  const int64_t to = std::min(until_us, from + max_windows * kWindowUs);

  std::vector<std::string> gone;  // ctids of the rows taken
  std::map<int64_t, std::vector<Keyed>> windows;  // by window start
  std::map<int64_t, int64_t> first_id;            // the smallest id of each window's rows
  auto note_id = [&](int64_t window, int64_t id) {
    auto [it, added] = first_id.emplace(window, id);
    if (!added) it->second = std::min(it->second, id);
  };
  int64_t raw_rows = 0;
  for (const pqxx::row& row : tx.exec_params(
           RowsSql(absl::StrCat("ctid, id, ", EpochMicrosSql("end_time"),
                                ", total_batches, packed_values"),
                   "packed_values IS NOT NULL"),
           trial, agent, from, to)) {
    const int64_t id = row[1].as<int64_t>();
    const int64_t t = row[2].as<int64_t>();
    const std::string packed = DecodeByteaHex(row[4].c_str());
    absl::StatusOr<std::vector<SeriesValue>> values = UnpackReport(packed);
    if (!values.ok()) {
      throw std::runtime_error(absl::StrCat("raw row ", id, ": ", values.status().message()));
    }
    std::optional<int32_t> batch;
    if (!row[3].is_null()) batch = row[3].as<int32_t>();
    const int64_t window = AlignDown(t, kWindowUs);
    counts.raw_bytes += static_cast<int64_t>(row[4].size() - 2) / 2;
    windows[window].push_back(
        {{t, id, 0}, WindowReport(t, *std::move(values), batch), IsPendingReport(packed)});
    note_id(window, id);
    gone.push_back(row[0].as<std::string>());
    ++raw_rows;
  }
  // The windows' earlier seals, merged in.
  for (const pqxx::row& row : tx.exec_params(
           RowsSql(absl::StrCat("ctid, id, ", EpochMicrosSql("end_time"), ", sealed_values"),
                   "packed_values IS NULL AND sealed_values IS NOT NULL"),
           trial, agent, from, to)) {
    const int64_t window = row[2].as<int64_t>();
    auto it = windows.find(window);
    if (it == windows.end()) continue;  // no late rows for it
    const int64_t id = row[1].as<int64_t>();
    absl::StatusOr<std::vector<WindowReport>> sealed =
        UnsealWindow(DecodeByteaHex(row[3].c_str()));
    if (!sealed.ok()) {
      throw std::runtime_error(absl::StrCat("sealed row ", id, ": ", sealed.status().message()));
    }
    for (size_t k = 0; k < sealed->size(); ++k) {
      WindowReport& r = (*sealed)[k];
      it->second.push_back({{r.time_us, id, static_cast<int32_t>(k)}, std::move(r)});
    }
    note_id(window, id);
    gone.push_back(row[0].as<std::string>());
  }

  std::vector<int64_t> ids, starts;
  std::vector<std::string> blobs;
  std::vector<std::vector<WindowReport>> sealed(windows.size());
  std::vector<const WindowReport*> for_rollups;  // in storage order
  size_t w = 0;
  for (auto& [window, reports] : windows) {
    std::sort(reports.begin(), reports.end(),
              [](const Keyed& a, const Keyed& b) { return a.key < b.key; });
    std::vector<WindowReport>& ordered = sealed[w++];
    ordered.reserve(reports.size());
    for (Keyed& k : reports) ordered.push_back(std::move(k.report));
    for (size_t k = 0; k < reports.size(); ++k) {
      if (reports[k].pending) for_rollups.push_back(&ordered[k]);
    }
    counts.reports += static_cast<int64_t>(ordered.size());
    ids.push_back(first_id[window]);
    starts.push_back(window);
    blobs.push_back(SealWindow(ordered));
    counts.sealed_bytes += static_cast<int64_t>(blobs.back().size());
  }
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
  total.windows += static_cast<int64_t>(blobs.size());
  total.rows += raw_rows;
  total.reports += counts.reports;
  total.raw_bytes += counts.raw_bytes;
  total.sealed_bytes += counts.sealed_bytes;
  return static_cast<int64_t>(blobs.size());
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
  SealSummary summary;
  SealProgress progress;
  progress.agents_total = static_cast<int>(agents.size());
  Counts counts;
  for (const auto& [trial, agent] : agents) {
    progress.trial_id = trial;
    progress.agent_id = agent;
    for (;;) {
      if (options.interrupted && options.interrupted()) break;
      int64_t sealed = 0;
      RETURN_IF_ERROR(GuardPg(absl::StrCat("sealing windows of agent ", agent, " of trial ", trial),
                              [&, trial = trial, agent = agent]() -> absl::Status {
                                sealed = SealSome(*conn, trial, agent, until_us,
                                                  std::max(1, options.windows_per_transaction),
                                                  counts);
                                return absl::OkStatus();
                              }));
      progress.windows = counts.windows;
      progress.rows = counts.rows;
      if (options.progress) options.progress(progress);
      if (sealed == 0) break;
    }
    ++progress.agents_done;
  }
  summary.agents = progress.agents_total;
  summary.windows = counts.windows;
  summary.rows = counts.rows;
  summary.reports = counts.reports;
  summary.raw_bytes = counts.raw_bytes;
  summary.sealed_bytes = counts.sealed_bytes;
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

SealerLoop::SealerLoop(SealOptions options, absl::Duration every,
                       std::function<void(const std::string&)> log) {
  options.interrupted = [this] { return stop_.HasBeenNotified(); };
  thread_ = std::thread([this, options = std::move(options), every, log = std::move(log)] {
    do {
      absl::StatusOr<SealSummary> pass = SealClosedWindows(options);
      if (!pass.ok()) {
        log(absl::StrCat("sealer: ", pass.status().message(), "; trying again in ",
                         absl::FormatDuration(every)));
      } else if (pass->windows > 0) {
        log(absl::StrCat("sealer: sealed ", pass->windows, " windows of ", pass->agents,
                         " agents (", pass->rows, " raw rows, ", pass->raw_bytes, " bytes of values, now ",
                         pass->sealed_bytes, ")"));
      }
    } while (!stop_.WaitForNotificationWithTimeout(every));
  });
}

SealerLoop::~SealerLoop() {
  stop_.Notify();
  thread_.join();
}

}  // namespace metrics::storage::pg
