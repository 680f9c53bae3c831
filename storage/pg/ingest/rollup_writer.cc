#include "storage/pg/ingest/rollup_writer.h"

#include <pqxx/binarystring>
#include <pqxx/result>

#include <algorithm>
#include <functional>
#include <iterator>
#include <map>
#include <numeric>
#include <stdexcept>
#include <tuple>
#include <utility>

#include "absl/container/btree_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "storage/format/rollup_codec.h"
#include "storage/pg/lock_keys.h"
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

// A bucket to write: a group's samples and, when a row of it is stored (and
// merged in), that row's address (ctid): it is then updated there, not
// inserted.
struct FreshBucket {
  SortedRollup rollup;
  std::string stored_at;
  Folding folding = Folding::kFolded;
};
using FreshBuckets = std::map<RollupKey, FreshBucket, std::less<>>;
// A group's samples in finest buckets, before they are folded or written.
using FinestBuckets = std::map<RollupKey, SortedRollup>;

constexpr int kFinestWidth = kRollupWidthsSeconds[0];

// The rollup writer's statements, prepared on each writer connection.
struct Statements {
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
  // Each agent's newest finest bucket, and where it is.
  PreparedStatement newest_finest{
      "newest_finest",
      NewestRollupRowsSql("SELECT * FROM unnest($1::int[], $2::text[]) "
                          "AS k(trial_id, agent_id)",
                          "$3", /*keep_agents_without_row=*/false,
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

  std::vector<PreparedStatement> All() const {
    return {newest_finest, read_rollups, insert_rollups, update_rollups};
  }
};

const Statements& Sql() {
  static const auto* statements = new Statements();
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

// Where to look for the stored ones among a group's buckets: per agent and
// width, runs of bucket starts as [from, to] ranges. Nearly every bucket of
// reports sent in order is new, and a probe per bucket cost more than the
// inserts; a range scan finds the few stored ones (the edges of earlier
// batches) at once. A run ends at a gap of more than kMaxGap buckets, so a
// range reads at most that many stored buckets the group does not have
// for each one it has (a backfill spread over months, beside live data).
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

}  // namespace

// The state of one Write.
class RollupWriter::Run {
 public:
  Run(pqxx::work& tx, const std::function<void(std::vector<int64_t>)>& lock)
      : tx_(tx), lock_(lock) {}

  // Rollups are gathered, merged and written for this many agents at a
  // time. What a batch's agent has to write is held until it is written; a
  // group of a hundred agents' batches held it all at once
  // (docs/benchmarks.md, "Rollups: one row a report"). A few more
  // statements a group cost far less.
  static constexpr size_t kRollupChunkAgents = 25;

  void Write(const std::vector<RollupInput>& batches) {
    // Each agent's batches in group order: their samples merge in the
    // order they were ingested.
    std::map<std::pair<int32_t, absl::string_view>, std::vector<const RollupInput*>>
        by_agent;
    for (const RollupInput& a : batches) {
      if (a.batch->metric_group != kSystemGroup || a.batch->reports.empty()) {
        continue;  // no rollups kept, or none to add
      }
      by_agent[{a.batch->trial_id, a.batch->agent_id}].push_back(&a);
    }
    if (by_agent.empty()) return;
    // Every agent's lock at once, in order: taken chunk by chunk, two
    // writers could take them in opposite orders.
    std::vector<int64_t> locks;
    for (const auto& [agent, unused] : by_agent) {
      locks.push_back(RollupLockKey(agent.first, agent.second));
    }
    lock_(std::move(locks));
    for (auto agent = by_agent.begin(); agent != by_agent.end();) {
      FinestBuckets finest;
      for (size_t n = 0; n < kRollupChunkAgents && agent != by_agent.end();
           ++n, ++agent) {
        for (const RollupInput* a : agent->second) AggregateBatch(*a, finest);
      }
      WriteRollupChunk(finest);
    }
  }

  // An agent's newest stored finest bucket.
  struct NewestBucket {
    int64_t start = 0;
    SortedRollup rollup;
    std::string stored_at;
    bool unfolded = false;
  };
  using AgentKey = std::pair<int32_t, std::string>;

  // Writes `finest` (whose agents' locks are held) and what it changes in
  // the coarser widths. A report in its agent's newest finest bucket goes
  // to that bucket alone, which stays unfolded; the coarser widths take a
  // bucket once a newer one starts, and a late report (older than the
  // newest bucket) at once (rollup.h). Merged with what is stored: stored
  // samples were ingested earlier.
  void WriteRollupChunk(const FinestBuckets& finest) {
    if (finest.empty()) return;
    std::map<AgentKey, NewestBucket> newest = ReadNewest(finest);
    FreshBuckets ready;    // rows whose stored part is merged in already
    FreshBuckets pending;  // rows to merge with what is stored first
    for (auto it = finest.begin(); it != finest.end();) {
      const int32_t trial = std::get<0>(it->first);
      const std::string& agent = std::get<1>(it->first);
      auto end = it;
      while (end != finest.end() && std::get<0>(end->first) == trial &&
             std::get<1>(end->first) == agent) {
        ++end;
      }
      // The agent's buckets, in time order; `top` will be its newest.
      const auto found = newest.find(AgentKey{trial, agent});
      NewestBucket* stored = found == newest.end() ? nullptr : &found->second;
      int64_t top = std::get<3>(std::prev(end)->first);
      if (stored != nullptr) top = std::max(top, stored->start);
      bool stored_taken = false;
      for (; it != end; ++it) {
        const RollupKey& key = it->first;
        const int64_t start = std::get<3>(key);
        const SortedRollup& samples = it->second;
        if (stored != nullptr && start < stored->start) {
          // Late: the coarser widths hold this bucket's stored samples.
          Fold(key, samples, pending);
          pending[key].rollup = samples;
          continue;
        }
        FreshBucket& row = ready[key];
        if (stored != nullptr && start == stored->start) {
          stored_taken = true;
          row.rollup = MergeSortedRollups(stored->rollup, samples);
          row.stored_at = stored->stored_at;
          if (!stored->unfolded) {
            Fold(key, samples, pending);  // written folded, by an older version
            continue;
          }
        } else {
          row.rollup = samples;
        }
        if (start == top) {
          row.folding = Folding::kUnfolded;
        } else {
          Fold(key, row.rollup, pending);
        }
      }
      if (stored != nullptr && !stored_taken && stored->unfolded &&
          stored->start < top) {
        // Passed by newer samples: folded, and marked so.
        const RollupKey key{trial, agent, kFinestWidth, stored->start};
        Fold(key, stored->rollup, pending);
        FreshBucket& row = ready[key];
        row.rollup = std::move(stored->rollup);
        row.stored_at = std::move(stored->stored_at);
      }
    }
    MergeStored(pending);
    WriteRows(ready, pending);
  }

  // The newest stored finest bucket of each of `finest`'s agents that has
  // one.
  std::map<AgentKey, NewestBucket> ReadNewest(const FinestBuckets& finest) {
    std::vector<int64_t> trials;
    std::vector<std::string> agents;
    for (const auto& [key, unused] : finest) {
      if (!agents.empty() && trials.back() == std::get<0>(key) &&
          agents.back() == std::get<1>(key)) {
        continue;
      }
      trials.push_back(std::get<0>(key));
      agents.push_back(std::get<1>(key));
    }
    std::map<AgentKey, NewestBucket> newest;
    std::string bytes;
    for (const auto& row :
         tx_.exec_prepared(Sql().newest_finest.name, IntArray(trials),
                           TextArray(agents), kFinestWidth)) {
      NewestBucket& bucket =
          newest[AgentKey{row[0].as<int32_t>(), row[1].as<std::string>()}];
      bucket.start = row[3].as<int64_t>();
      bucket.rollup = DecodeStored(row[2], bucket.start, bytes);
      bucket.unfolded = IsUnfolded(bytes);
      bucket.stored_at = row[4].as<std::string>();
    }
    return newest;
  }

  // Merges into `rows` what is stored of them, and notes where.
  void MergeStored(FreshBuckets& rows) {
    if (rows.empty()) return;
    // Relies on the primary key (trial_id, agent_id, width_s, bucket_start).
    const RollupRanges ranges(rows);
    std::string bytes;
    for (const auto& row :
         tx_.exec_prepared(Sql().read_rollups.name, IntArray(ranges.trials),
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

  // Adds a finest bucket's `samples` to the buckets of the coarser widths
  // holding it, in `into`.
  static void Fold(const RollupKey& finest, const SortedRollup& samples,
                   FreshBuckets& into) {
    for (size_t w = 1; w < std::size(kRollupWidthsSeconds); ++w) {
      SortedRollup& coarse =
          into[RollupKey{std::get<0>(finest), std::get<1>(finest),
                         kRollupWidthsSeconds[w],
                         BucketStartMicros(std::get<3>(finest),
                                           kRollupWidthsSeconds[w])}]
              .rollup;
      coarse = coarse.empty() ? samples : MergeSortedRollups(coarse, samples);
    }
  }

  // Inserts the new buckets and updates the stored ones: no ON CONFLICT,
  // whose speculative insertion cost a third of these writes' time
  // (docs/benchmarks.md, "Statements that stay index probes"). Sound
  // because the advisory locks
  // keep every other writer of these agents' rollups (ingest on any server,
  // rebuilds) out until this commits.
  void WriteRows(const FreshBuckets& ready, const FreshBuckets& pending) {
    RollupColumns inserted, updated;
    for (const FreshBuckets* rows : {&ready, &pending}) {
      for (const auto& [key, bucket] : *rows) {
        const bool stored = !bucket.stored_at.empty();
        RollupColumns& into = stored ? updated : inserted;
        into.AddKey(key);
        into.stats.push_back(
            EncodeAgentRollup(bucket.rollup, std::get<3>(key), bucket.folding));
        if (stored) into.rows.push_back(bucket.stored_at);
      }
    }
    // An insert of a stored bucket fails on the key by itself; an update
    // of a vanished or moved one would drop its stats silently.
    const auto check = [](const pqxx::result& written, const RollupColumns& rows) {
      if (written.affected_rows() != rows.trials.size()) {
        throw std::runtime_error("rollup rows changed under their lock");
      }
    };
    if (!inserted.trials.empty()) {
      check(tx_.exec_prepared(
                Sql().insert_rollups.name, IntArray(inserted.trials),
                TextArray(inserted.agents), IntArray(inserted.widths),
                IntArray(inserted.buckets),
                pqxx::binarystring(ByteaArrayBinary(inserted.stats))),
            inserted);
    }
    if (!updated.trials.empty()) {
      check(tx_.exec_prepared(
                Sql().update_rollups.name, IntArray(updated.trials),
                TextArray(updated.agents), IntArray(updated.widths),
                IntArray(updated.buckets),
                pqxx::binarystring(ByteaArrayBinary(updated.stats)),
                TextArray(updated.rows)),
            updated);
    }
  }

  // Adds a batch's samples to its finest buckets in `finest`. A bucket holds
  // its stats by declaration (a slot per declared series) while it is
  // filled, not in a map by series id: one array slot per sample instead of
  // a map look-up.
  static void AggregateBatch(const RollupInput& a, FinestBuckets& finest) {
    const MetricBatch& batch = *a.batch;
    if (batch.metric_group != kSystemGroup) return;  // no rollups kept
    const size_t declared = a.series_ids->size();
    absl::btree_map<int64_t, std::vector<RollupStats>> buckets;
    std::vector<RollupStats>* open = nullptr;  // reports come mostly in order
    int64_t open_start = 0;
    for (const Report& report : batch.reports) {
      const int64_t t = report.time_us;
      const int64_t start = BucketStartMicros(t, kFinestWidth);
      if (open == nullptr || start != open_start) {
        open = &buckets[start];
        if (open->empty()) open->resize(declared);
        open_start = start;
      }
      for (size_t v = 0; v < report.values.size(); ++v) {
        (*open)[report.series[v]].Add(t, report.values[v]);
      }
    }
    // The declarations by series id, so each bucket is gathered sorted.
    std::vector<size_t> by_id(declared);
    std::iota(by_id.begin(), by_id.end(), size_t{0});
    std::sort(by_id.begin(), by_id.end(), [&a](size_t x, size_t y) {
      return (*a.series_ids)[x] < (*a.series_ids)[y];
    });
    for (const auto& [start, stats] : buckets) {
      SortedRollup gathered;
      gathered.reserve(declared);
      for (size_t d : by_id) {
        if (stats[d].count > 0) gathered.emplace_back((*a.series_ids)[d], stats[d]);
      }
      SortedRollup& into =
          finest[RollupKey{batch.trial_id, batch.agent_id, kFinestWidth, start}];
      // Another batch of the group may have filled it already.
      into = into.empty() ? std::move(gathered)
                          : MergeSortedRollups(into, gathered);
    }
  }

 private:
  pqxx::work& tx_;
  const std::function<void(std::vector<int64_t>)>& lock_;
};

std::vector<PreparedStatement> RollupWriter::Statements() {
  return Sql().All();
}

void RollupWriter::Write(pqxx::work& tx, const std::vector<RollupInput>& batches,
                         const std::function<void(std::vector<int64_t>)>& lock) {
  Run(tx, lock).Write(batches);
}

}  // namespace metrics::storage::pg
