// A writer's cache of committed registry entries: (trial, metric group,
// agent, GPU, name) → (series id, unit). Entries never change once
// registered, so the cache needs no invalidation; it is bounded, and
// cleared whole when full (a miss costs one look-up in the next group).
//
// Compact because a server with thousands of agents holds 25+ series of
// each: entries are grouped by agent, an agent's GPU UUIDs are stored once,
// and names and units (a few dozen distinct strings) are interned: about
// 35 bytes a series, against about 250 for a map keyed by the joined
// labels.
//
// Thread-safety: thread-compatible (one per writer lane).
#ifndef METRICS_STORAGE_PG_SERIES_ID_CACHE_H_
#define METRICS_STORAGE_PG_SERIES_ID_CACHE_H_

#include <cstdint>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/node_hash_set.h"
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
    uint32_t gpu;             // index into Agent::gpus
    const std::string* name;  // interned
    const std::string* unit;  // interned
    int64_t id;
  };
  struct Agent {
    std::vector<std::string> gpus;  // "" (host series) among them
    std::vector<Series> series;     // sorted by (gpu UUID, name)
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

  // The position in `agent.series` where (gpu, name) is or would go.
  static std::vector<Series>::const_iterator Position(
      const Agent& agent, absl::string_view gpu, absl::string_view name);
  const std::string* Intern(absl::string_view s);

  const size_t max_series_;
  size_t size_ = 0;
  absl::flat_hash_map<AgentKey, Agent, AgentHash, AgentEq> agents_;
  absl::node_hash_set<std::string> strings_;  // names and units
};

}  // namespace metrics::storage::pg

#endif  // METRICS_STORAGE_PG_SERIES_ID_CACHE_H_
