// A writer's cache of committed registry entries: (trial, metric group,
// agent, GPU, name) → (series id, unit). Entries never change once
// registered, so the cache needs no invalidation; it is bounded, and
// cleared whole when full (a miss costs one look-up in the next group).
//
// Compact because a server with thousands of agents holds 25+ series of
// each: entries are grouped by agent, an agent's GPU UUIDs are stored once
// in one string, names and units (a few dozen distinct strings) are
// interned and named by a 16-bit index, and an agent's array of series
// grows by an eighth, not by doubling: about 640 bytes for an agent of 25
// series on 8 GPUs (heaptrack; docs/benchmarks.md, "Memory at thousands of
// streams"), against 1.8 KB with a pointer per label and doubling vectors.
//
// Thread-safety: thread-compatible (one per writer lane).
#ifndef METRICS_STORAGE_PG_INGEST_SERIES_ID_CACHE_H_
#define METRICS_STORAGE_PG_INGEST_SERIES_ID_CACHE_H_

#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/string_view.h"

namespace metrics::storage::pg {

// A series' labels, as a batch declares them.
struct SeriesLabels {
  int32_t trial_id;
  absl::string_view metric_group;
  absl::string_view agent_id;
  absl::string_view gpu_uuid;
  absl::string_view name;
};

class SeriesIdCache {
 public:
  struct Entry {
    int64_t id;
    absl::string_view unit;  // valid until the next Insert
  };

  explicit SeriesIdCache(size_t max_series) : max_series_(max_series) {}

  std::optional<Entry> Find(const SeriesLabels& labels) const;

  // Adds (or replaces) an entry; clears the cache first when it is full.
  void Insert(const SeriesLabels& labels, int64_t id, absl::string_view unit);

  size_t size() const { return size_; }

 private:
  struct Series {
    int64_t id;
    uint16_t gpu;   // offset of its UUID in Agent::gpus
    uint16_t name;  // index into strings_
    uint16_t unit;  // index into strings_
  };
  struct Agent {
    // Each UUID ("" for host series among them) as a length byte and its
    // characters. Labels are at most 128 characters unless a deployment
    // raises the limit; a UUID over 255 is not cached.
    std::string gpus;
    std::vector<Series> series;  // sorted by (gpu UUID, name)
  };
  using AgentKey = std::tuple<int32_t, std::string, std::string>;
  // Looks agents up by views of their labels, without building a key.
  struct AgentHash {
    using is_transparent = void;
    size_t operator()(const AgentKey& k) const;
    size_t operator()(const SeriesLabels& l) const;
  };
  struct AgentEq {
    using is_transparent = void;
    bool operator()(const AgentKey& a, const AgentKey& b) const;
    bool operator()(const AgentKey& a, const SeriesLabels& b) const;
  };

  static absl::string_view Gpu(const Agent& agent, uint16_t offset);
  // The offset of `uuid` in agent.gpus, added if new; nullopt when the
  // string would outgrow 16-bit offsets.
  static std::optional<uint16_t> GpuOffset(Agent& agent, absl::string_view uuid);
  // The position in `agent.series` where (gpu, name) is or would go.
  std::vector<Series>::const_iterator Position(const Agent& agent,
                                               absl::string_view gpu,
                                               absl::string_view name) const;
  // Whether `it` is the entry for (gpu, name).
  bool Matches(const Agent& agent, std::vector<Series>::const_iterator it,
               absl::string_view gpu, absl::string_view name) const;
  // The index of `s` in strings_, added if new; nullopt when full.
  std::optional<uint16_t> Intern(absl::string_view s);
  void Clear();

  const size_t max_series_;
  size_t size_ = 0;
  absl::flat_hash_map<AgentKey, Agent, AgentHash, AgentEq> agents_;
  // Names and units, by index; a deque, so views of them stay valid.
  std::deque<std::string> strings_;
  absl::flat_hash_map<absl::string_view, uint16_t> string_index_;
};

}  // namespace metrics::storage::pg

#endif  // METRICS_STORAGE_PG_INGEST_SERIES_ID_CACHE_H_
