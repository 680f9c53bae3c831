#include "storage/pg/reads/rollup_rows.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "storage/pg/rollup_sql.h"
#include "storage/pg/sql_arrays.h"
#include "storage/pg/sql_time.h"
#include "storage/rollup.h"
#include "storage/format/rollup_codec.h"

namespace metrics::storage::pg {

namespace {

bool IsLegacyFinest(int width_s) { return width_s == kLegacyFinestWidthSeconds; }

}  // namespace

std::string RollupRowsSql(absl::string_view trial_sql,
                          absl::string_view agents_sql, int width_s,
                          std::optional<BucketWindow> window) {
  std::string stored = absl::StrCat(
      "SELECT agent_id, ", EpochMicrosSql("bucket_start"),
      " AS start_us, stats, width_s FROM system_rollups WHERE trial_id = ",
      trial_sql, " AND agent_id = ANY(", agents_sql, ") AND width_s = ",
      width_s);
  if (window.has_value()) {
    absl::StrAppend(
        &stored, " AND bucket_start >= ",
        TimestampFromMicrosSql(absl::StrCat(window->from_us)),
        " AND bucket_start < ",
        TimestampFromMicrosSql(absl::StrCat(window->to_us)));
  }
  // Each agent's newest 10 s bucket of an earlier version; the decoder
  // drops it once folded.
  // One statement, so the coarser rows and it come from one snapshot.
  const std::string unfolded =
      IsLegacyFinest(width_s)
          ? ""
          : absl::StrCat(
                " UNION ALL SELECT u.agent_id, u.start_us, u.stats, ",
                kLegacyFinestWidthSeconds, " FROM (",
                NewestRollupRowsSql(
                    absl::StrCat("SELECT ", trial_sql, " AS trial_id, unnest(",
                                 agents_sql, ") AS agent_id"),
                    absl::StrCat(kLegacyFinestWidthSeconds)),
                ") u");
  return absl::StrCat("SELECT agent_id, start_us, stats, width_s FROM (",
                      stored, unfolded,
                      ") r ORDER BY agent_id, start_us, width_s DESC");
}

RollupRowDecoder::RollupRowDecoder(int width_s,
                                   std::optional<BucketWindow> window,
                                   std::optional<std::vector<int64_t>> wanted)
    : width_s_(width_s), window_(window), wanted_(std::move(wanted)) {}

absl::StatusOr<bool> RollupRowDecoder::Decode(const pqxx::row& row,
                                              RollupRow& out) const {
  const int64_t start = row[1].as<int64_t>();
  const std::string bytes = DecodeByteaHex(row[2].c_str());
  out.bucket_start_us = start;
  if (!IsLegacyFinest(width_s_) && IsLegacyFinest(row[3].as<int>())) {
    if (!IsUnfolded(bytes)) return false;
    out.bucket_start_us = BucketStartMicros(start, width_s_);
    if (window_.has_value() && (out.bucket_start_us < window_->from_us ||
                                out.bucket_start_us >= window_->to_us)) {
      return false;
    }
  }
  absl::StatusOr<AgentRollup> stats =
      wanted_.has_value() ? DecodeAgentRollup(bytes, start, *wanted_)
                          : DecodeAgentRollup(bytes, start);
  if (!stats.ok()) return stats.status();
  out.agent_id = row[0].as<std::string>();
  out.stats = *std::move(stats);
  return true;
}

}  // namespace metrics::storage::pg
