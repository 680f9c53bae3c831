#include "storage/pg/jobs/sealed_rollups.h"

#include <pqxx/binarystring>
#include <pqxx/result>

#include <algorithm>
#include <iterator>
#include <map>
#include <stdexcept>
#include <tuple>
#include <utility>

#include "absl/container/btree_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "storage/format/rollup_codec.h"
#include "storage/pg/prepared.h"
#include "storage/pg/rollup_sql.h"
#include "storage/pg/sql_arrays.h"
#include "storage/pg/sql_time.h"
#include "storage/rollup.h"

namespace metrics::storage::pg {

namespace {

// (trial, agent, width, bucket start in microseconds)
using RollupKey = std::tuple<int32_t, std::string, int, int64_t>;
// The same naming a stored row's agent in place, to find its bucket.
using RollupKeyView = std::tuple<int32_t, absl::string_view, int, int64_t>;

// A bucket to write: the seal's samples and, when a row of it is stored (and
// merged in), that row's address (ctid): it is then updated there, not
// inserted.
struct FreshBucket {
  SortedRollup rollup;
  std::string stored_at;
};
using FreshBuckets = std::map<RollupKey, FreshBucket, std::less<>>;

// The seal's statements, run as parameterised statements (a seal
// transaction runs a few of them for minutes of an agent's data).
struct RollupStatements {
  // The stored buckets in ranges of bucket starts (RollupRanges), one
  // index range scan each, and where each row is.
  PreparedStatement read_rollups{
      "read_rollups",
      absl::StrCat("SELECT r.trial_id, r.agent_id, r.width_s, ",
                   EpochMicrosSql("r.bucket_start"),
                   ", r.stats, r.ctid "
                   "FROM unnest($1::int[], $2::text[], $3::int[], "
                   "$4::bigint[], $5::bigint[]) "
                   "AS k(trial_id, agent_id, width_s, from_us, to_us) "
                   "JOIN system_rollups r ON r.trial_id = k.trial_id "
                   "AND r.agent_id = k.agent_id AND r.width_s = k.width_s "
                   "AND r.bucket_start BETWEEN ",
                   TimestampFromMicrosSql("k.from_us"), " AND ",
                   TimestampFromMicrosSql("k.to_us"))};
  // The agent's newest bucket of the earlier versions' 10 s width, and
  // where it is.
  PreparedStatement newest_legacy_finest{
      "newest_legacy_finest",
      NewestRollupRowsSql("SELECT $1::int AS trial_id, $2::text AS agent_id",
                          absl::StrCat(kLegacyFinestWidthSeconds),
                          /*keep_agents_without_row=*/false,
                          /*with_row_address=*/true)};
  PreparedStatement insert_rollups{
      "insert_rollups",
      absl::StrCat(
          "INSERT INTO system_rollups (trial_id, agent_id, width_s, "
          "bucket_start, stats) SELECT k.trial_id, k.agent_id, k.width_s, ",
          TimestampFromMicrosSql("k.bucket_us"),
          ", k.stats FROM unnest($1::int[], $2::text[], $3::int[], $4::bigint[], "
          "  $5::bytea[]) AS k(trial_id, agent_id, width_s, bucket_us, stats)")};
  // Each row at the address the read found (a TID scan, not another
  // descent of the primary key: a third of the update's time), which the
  // agents' advisory locks keep from moving meanwhile. The key is checked
  // too: a row found elsewhere is not updated, and the count says so.
  PreparedStatement update_rollups{
      "update_rollups",
      absl::StrCat(
          "UPDATE system_rollups r SET stats = k.stats "
          "FROM unnest($1::int[], $2::text[], $3::int[], $4::bigint[], "
          "  $5::bytea[], $6::tid[]) "
          "AS k(trial_id, agent_id, width_s, bucket_us, stats, row) "
          "WHERE r.ctid = k.row AND r.trial_id = k.trial_id "
          "AND r.agent_id = k.agent_id AND r.width_s = k.width_s "
          "AND r.bucket_start = ",
          TimestampFromMicrosSql("k.bucket_us"))};
};

const RollupStatements& RollupSql() {
  static const auto* statements = new RollupStatements();
  return *statements;
}

// Rollup rows as column arrays, the statements' parameters.
struct RollupColumns {
  std::vector<int64_t> trials, widths, buckets;
  std::vector<std::string> agents;
  std::vector<std::string> stats;  // EncodeAgentRollup's bytes
  std::vector<std::string> rows;   // stored rows' addresses, to update

  void AddKey(const RollupKey& key) {
    trials.push_back(std::get<0>(key));
    agents.push_back(std::get<1>(key));
    widths.push_back(std::get<2>(key));
    buckets.push_back(std::get<3>(key));
  }
};

// Where to look for the stored ones among a seal's buckets: per agent and
// width, runs of bucket starts as [from, to] ranges, one range scan each
// instead of a probe per bucket. A run ends at a gap of more than kMaxGap
// buckets, so a range reads at most that many stored buckets the seal does
// not have for each one it has.
struct RollupRanges {
  static constexpr int64_t kMaxGap = 16;
  std::vector<int64_t> trials, widths, from, to;
  std::vector<std::string> agents;

  // `keys` in order, so an agent's buckets of one width are adjacent.
  template <typename Map>
  explicit RollupRanges(const Map& keys) {
    const RollupKey* open = nullptr;  // the current range's first key
    for (const auto& [key, unused] : keys) {
      const int64_t width_us = int64_t{std::get<2>(key)} * 1000000;
      if (open != nullptr && std::get<0>(key) == std::get<0>(*open) &&
          std::get<1>(key) == std::get<1>(*open) &&
          std::get<2>(key) == std::get<2>(*open) &&
          std::get<3>(key) - to.back() <= kMaxGap * width_us) {
        to.back() = std::get<3>(key);
        continue;
      }
      open = &key;
      trials.push_back(std::get<0>(key));
      agents.push_back(std::get<1>(key));
      widths.push_back(std::get<2>(key));
      from.push_back(std::get<3>(key));
      to.push_back(std::get<3>(key));
    }
  }
};

// The state of one AddToRollups.
class Adder {
 public:
  explicit Adder(pqxx::work& tx) : tx_(tx) {}

  void Add(int32_t trial, const std::string& agent,
           const std::vector<const WindowReport*>& reports) {
    FreshBuckets fresh;
    FoldLegacyFinest(trial, agent, fresh);
    // The finest width's buckets from the reports, then each coarser one
    // from the finer: buckets are disjoint in time, so merging them in time
    // order keeps first and last exact.
    absl::btree_map<int64_t, AgentRollup> finest;
    for (const WindowReport* r : reports) {
      AgentRollup& bucket = finest[BucketStartMicros(r->time_us, kRollupWidthsSeconds[0])];
      for (const auto& [id, value] : r->values) bucket[id].Add(r->time_us, value);
    }
    for (int width : kRollupWidthsSeconds) {
      absl::btree_map<int64_t, AgentRollup> buckets;
      for (const auto& [start, rollup] : finest) {
        MergeAgentRollup(buckets[BucketStartMicros(start, width)], rollup);
      }
      for (auto& [start, rollup] : buckets) {
        FreshBucket& into = fresh[RollupKey{trial, agent, width, start}];
        const SortedRollup sorted(rollup.begin(), rollup.end());
        // After the folded 10 s bucket's samples: those were ingested first.
        into.rollup = into.rollup.empty() ? sorted : MergeSortedRollups(into.rollup, sorted);
      }
    }
    MergeStored(fresh);
    WriteRows(fresh);
  }

 private:
  // Adds the agent's unfolded 10 s bucket of an earlier version to `fresh`
  // at every width, and notes it (and its address) in `legacy_` to be
  // rewritten folded.
  void FoldLegacyFinest(int32_t trial, const std::string& agent, FreshBuckets& fresh) {
    const pqxx::result newest =
        tx_.exec_params(RollupSql().newest_legacy_finest.sql, trial, agent);
    if (newest.empty()) return;
    std::string bytes;
    const int64_t start = newest[0][3].as<int64_t>();
    SortedRollup rollup = DecodeStored(newest[0][2], start, bytes);
    if (!IsUnfolded(bytes)) return;
    for (int width : kRollupWidthsSeconds) {
      fresh[RollupKey{trial, agent, width, BucketStartMicros(start, width)}].rollup = rollup;
    }
    legacy_.key = RollupKey{trial, agent, kLegacyFinestWidthSeconds, start};
    legacy_.bucket.rollup = std::move(rollup);
    legacy_.bucket.stored_at = newest[0][4].as<std::string>();
  }

  // Merges into `rows` what is stored of them, and notes where.
  void MergeStored(FreshBuckets& rows) {
    if (rows.empty()) return;
    // Relies on the primary key (trial_id, agent_id, width_s, bucket_start).
    const RollupRanges ranges(rows);
    std::string bytes;
    for (const auto& row :
         tx_.exec_params(RollupSql().read_rollups.sql, IntArray(ranges.trials),
                           TextArray(ranges.agents), IntArray(ranges.widths),
                           IntArray(ranges.from), IntArray(ranges.to))) {
      const int64_t start = row[3].as<int64_t>();
      const auto ours = rows.find(RollupKeyView{
          row[0].as<int32_t>(), absl::string_view(row[1].c_str(), row[1].size()),
          row[2].as<int>(), start});
      if (ours == rows.end()) continue;  // in a range, not in this group
      ours->second.rollup =
          MergeSortedRollups(DecodeStored(row[4], start, bytes), ours->second.rollup);
      ours->second.stored_at = row[5].as<std::string>();
    }
  }

  // A stored bucket's stats; `bytes` receives its packed form.
  static SortedRollup DecodeStored(const pqxx::field& stats, int64_t start,
                                   std::string& bytes) {
    if (!DecodeByteaHexInto(absl::string_view(stats.c_str(), stats.size()),
                            bytes)) {
      throw std::runtime_error("a stored rollup bucket is not bytea's hex");
    }
    absl::StatusOr<SortedRollup> decoded = DecodeSortedRollup(bytes, start);
    if (!decoded.ok()) throw std::runtime_error(decoded.status().ToString());
    return *std::move(decoded);
  }

  // Inserts the new buckets and updates the stored ones: no ON CONFLICT,
  // whose speculative insertion cost a third of these writes' time
  // (docs/benchmarks.md, "Statements that stay index probes"). Sound
  // because the advisory lock keeps every other writer of the agent's
  // rollups (sealers on any server, rebuilds) out until this commits.
  void WriteRows(const FreshBuckets& rows) {
    RollupColumns inserted, updated;
    if (!legacy_.bucket.stored_at.empty()) {
      updated.AddKey(legacy_.key);
      updated.stats.push_back(EncodeAgentRollup(legacy_.bucket.rollup,
                                                std::get<3>(legacy_.key), Folding::kFolded));
      updated.rows.push_back(legacy_.bucket.stored_at);
    }
    for (const auto& [key, bucket] : rows) {
      const bool stored = !bucket.stored_at.empty();
      RollupColumns& into = stored ? updated : inserted;
      into.AddKey(key);
      into.stats.push_back(EncodeAgentRollup(bucket.rollup, std::get<3>(key)));
      if (stored) into.rows.push_back(bucket.stored_at);
    }
    // An insert of a stored bucket fails on the key by itself; an update
    // of a vanished or moved one would drop its stats silently.
    const auto check = [](const pqxx::result& written, const RollupColumns& rows) {
      if (written.affected_rows() != rows.trials.size()) {
        throw std::runtime_error("rollup rows changed under their lock");
      }
    };
    if (!inserted.trials.empty()) {
      check(tx_.exec_params(
                RollupSql().insert_rollups.sql, IntArray(inserted.trials),
                TextArray(inserted.agents), IntArray(inserted.widths),
                IntArray(inserted.buckets),
                pqxx::binarystring(ByteaArrayBinary(inserted.stats))),
            inserted);
    }
    if (!updated.trials.empty()) {
      check(tx_.exec_params(
                RollupSql().update_rollups.sql, IntArray(updated.trials),
                TextArray(updated.agents), IntArray(updated.widths),
                IntArray(updated.buckets),
                pqxx::binarystring(ByteaArrayBinary(updated.stats)),
                TextArray(updated.rows)),
            updated);
    }
  }

  pqxx::work& tx_;
  struct {
    RollupKey key;
    FreshBucket bucket;  // stored_at empty: none to fold
  } legacy_;
};

}  // namespace

void AddToRollups(pqxx::work& tx, int32_t trial, const std::string& agent,
                  const std::vector<const WindowReport*>& reports) {
  Adder(tx).Add(trial, agent, reports);
}

}  // namespace metrics::storage::pg
