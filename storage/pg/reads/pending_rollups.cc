#include "storage/pg/reads/pending_rollups.h"

#include <pqxx/result>

#include <algorithm>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "storage/format/packed_report.h"
#include "storage/pg/reads/raw_values.h"
#include "storage/pg/sql_arrays.h"
#include "storage/pg/sql_time.h"
#include "storage/rollup.h"

namespace metrics::storage::pg {

namespace {

// The format-2 rows of agents $2 of trial $1 with end_time in [$3, $4), one
// range scan of the index of raw rows per agent.
std::string PendingRowsSql() {
  return absl::StrCat(
      "SELECT a.agent_id, r.t, r.id, r.packed_values FROM unnest($2::text[]) AS a(agent_id) "
      "CROSS JOIN LATERAL (SELECT ",
      EpochMicrosSql("end_time"), " AS t, id, packed_values FROM metrics_profiling "
      "WHERE trial_id = $1 AND ", SystemRowsOfAgentSql("a.agent_id"),
      " AND packed_values IS NOT NULL AND get_byte(packed_values, 0) = 2 AND end_time >= ",
      TimestampFromMicrosSql("$3"), " AND end_time < ", TimestampFromMicrosSql("$4"), ") r");
}

}  // namespace

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
  if (from >= to) return pending;
  struct Row {
    std::tuple<int64_t, int64_t> key;  // (time, id): ingest order
    size_t agent;
    std::vector<SeriesValue> values;
  };
  std::vector<Row> rows;
  const pqxx::result result =
      tx.exec_params(PendingRowsSql(), trial_id, TextArray(agents), from, to);
  std::vector<std::string> names;
  for (const pqxx::row& row : result) {
    const int64_t id = row[2].as<int64_t>();
    absl::StatusOr<std::vector<SeriesValue>> values =
        UnpackReport(DecodeByteaHex(row[3].c_str()));
    if (!values.ok()) {
      return absl::DataLossError(absl::StrCat("raw row ", id, ": ", values.status().message()));
    }
    if (names.empty() || names.back() != row[0].c_str()) names.push_back(row[0].as<std::string>());
    rows.push_back({{row[1].as<int64_t>(), id}, names.size() - 1, *std::move(values)});
  }
  std::sort(rows.begin(), rows.end(),
            [](const Row& a, const Row& b) { return a.key < b.key; });
  for (const Row& r : rows) {
    const int64_t t = std::get<0>(r.key);
    const int64_t start = AlignDown(t, width_us);
    RollupRow& bucket = pending.buckets_[{names[r.agent], start}];
    bucket.agent_id = names[r.agent];
    bucket.bucket_start_us = start;
    for (const auto& [series, value] : r.values) {
      if (wanted.has_value() && !std::binary_search(wanted->begin(), wanted->end(), series)) {
        continue;
      }
      bucket.stats[series].Add(t, value);
    }
  }
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
