#include "storage/pg/reads/pending_rollups.h"

#include <pqxx/result>

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "storage/format/packed_report.h"
#include "storage/pg/reads/raw_values.h"
#include "storage/pg/sql_arrays.h"
#include "storage/pg/sql_time.h"
#include "storage/rollup.h"

namespace metrics::storage::pg {

namespace {

// Rows a page brings at most: the waiting rows are read a page at a time,
// so a read holds one page of them however many wait (all of a run's, with
// the sealer off).
constexpr int kPendingRowsPerPage = 2000;

// The format-2 rows of agents `agents` (text[]) of trial `trial` with
// end_time in [from, to) (microseconds), each agent's in the order of ingest
// (time, id), one range scan of the index of raw rows per agent. The
// arguments are SQL: parameters or literals.
std::string PendingRowsSql(absl::string_view trial, absl::string_view agents,
                           absl::string_view from, absl::string_view to) {
  return absl::StrCat(
      "SELECT a.agent_id, r.t, r.packed_values FROM unnest(", agents,
      ") WITH ORDINALITY AS a(agent_id, n) CROSS JOIN LATERAL (SELECT ",
      EpochMicrosSql("end_time"), " AS t, id, packed_values FROM metrics_profiling WHERE trial_id = ",
      trial, " AND ", SystemRowsOfAgentSql("a.agent_id"),
      " AND packed_values IS NOT NULL AND get_byte(packed_values, 0) = 2 AND end_time >= ",
      TimestampFromMicrosSql(from), " AND end_time < ", TimestampFromMicrosSql(to),
      ") r ORDER BY a.n, r.t, r.id");
}

}  // namespace

PreparedStatement PendingRollups::Statement() {
  return {"pending_rows",
          absl::StrCat(PendingRowsSql("$1::int", "$2::text[]", "$3::bigint", "$4::bigint"),
                       " LIMIT ", kPendingRowsPerPage)};
}

absl::Status PendingRollups::Add(const pqxx::result& rows, int64_t width_us,
                                 const std::optional<std::vector<int64_t>>& wanted) {
  std::string bytes;
  for (const pqxx::row& row : rows) {
    const int64_t t = row[1].as<int64_t>();
    if (!DecodeByteaHexInto(absl::string_view(row[2].c_str(), row[2].size()), bytes)) {
      return absl::DataLossError("packed_values is not bytea's hex");
    }
    absl::StatusOr<std::vector<SeriesValue>> values = UnpackReport(bytes);
    if (!values.ok()) {
      return absl::DataLossError(absl::StrCat("a raw row of agent ", row[0].c_str(), " at ", t,
                                              ": ", values.status().message()));
    }
    const int64_t start = AlignDown(t, width_us);
    auto [it, added] = buckets_.try_emplace({row[0].as<std::string>(), start});
    RollupRow& bucket = it->second;
    if (added) {
      bucket.agent_id = it->first.first;
      bucket.bucket_start_us = start;
    }
    for (const auto& [series, value] : *values) {
      if (wanted.has_value() && !std::binary_search(wanted->begin(), wanted->end(), series)) {
        continue;
      }
      bucket.stats[series].Add(t, value);
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<PendingRollups> PendingRollups::Read(
    pqxx::transaction_base& tx, int32_t trial_id, const std::vector<std::string>& agents,
    int width_s, std::optional<BucketWindow> window,
    const std::optional<std::vector<int64_t>>& wanted) {
  const int64_t width_us = int64_t{width_s} * 1000000;
  // Rows whose bucket starts in the window: times from the first bucket
  // start at or after window->from_us to the first at or after to_us.
  const auto align_up = [width_us](int64_t t) { return AlignDown(t - 1, width_us) + width_us; };
  int64_t from = kYearOneMicros, to = kYearTenThousandMicros;
  if (window.has_value()) {
    from = align_up(window->from_us);
    to = align_up(window->to_us);
  }
  PendingRollups pending;
  if (from >= to || agents.empty()) return pending;
  // Usually the only statement: a few minutes of rows an agent wait.
  const pqxx::result first =
      tx.exec_prepared(Statement().name, trial_id, TextArray(agents), from, to);
  RETURN_IF_ERROR(pending.Add(first, width_us, wanted));
  if (first.size() < static_cast<size_t>(kPendingRowsPerPage)) return pending;
  // More wait: the rest through a cursor, one page at a time. The order is
  // total and the snapshot the same, so OFFSET skips exactly the first page.
  // DECLARE takes no parameters: the numbers are written out, the agents
  // quoted.
  tx.exec(absl::StrCat(
      "DECLARE pending_rows NO SCROLL CURSOR FOR ",
      PendingRowsSql(absl::StrCat(trial_id), absl::StrCat(tx.quote(TextArray(agents)), "::text[]"),
                     absl::StrCat(from), absl::StrCat(to)),
      " OFFSET ", kPendingRowsPerPage));
  const std::string fetch = absl::StrCat("FETCH ", kPendingRowsPerPage, " FROM pending_rows");
  for (;;) {
    const pqxx::result rows = tx.exec(fetch);
    RETURN_IF_ERROR(pending.Add(rows, width_us, wanted));
    if (rows.size() < static_cast<size_t>(kPendingRowsPerPage)) break;
  }
  tx.exec("CLOSE pending_rows");
  return pending;
}

void PendingRollups::TakeBefore(const std::string& agent, int64_t before_us,
                                absl::FunctionRef<void(const RollupRow&)> take) {
  auto it = buckets_.lower_bound({agent, INT64_MIN});
  while (it != buckets_.end() && it->first.first == agent && it->first.second < before_us) {
    if (!it->second.stats.empty()) take(it->second);
    it = buckets_.erase(it);
  }
}

void PendingRollups::TakeRest(absl::FunctionRef<void(const RollupRow&)> take) {
  for (const auto& [key, bucket] : buckets_) {
    if (!bucket.stats.empty()) take(bucket);
  }
  buckets_.clear();
}

void PendingMerger::Take(const RollupRow& row) {
  pending_.TakeBefore(row.agent_id, row.bucket_start_us,
                      [this](const RollupRow& p) { out_.Take(p); });
  out_.Take(row);
}

void PendingMerger::Finish() {
  pending_.TakeRest([this](const RollupRow& p) { out_.Take(p); });
}

}  // namespace metrics::storage::pg
