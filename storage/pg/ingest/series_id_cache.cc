#include "storage/pg/ingest/series_id_cache.h"

#include <algorithm>
#include <limits>

#include "absl/hash/hash.h"

namespace metrics::storage::pg {

size_t SeriesIdCache::AgentHash::operator()(const AgentKey& k) const {
  return absl::HashOf(std::get<0>(k), absl::string_view(std::get<1>(k)),
                      absl::string_view(std::get<2>(k)));
}

size_t SeriesIdCache::AgentHash::operator()(const SeriesLabels& l) const {
  return absl::HashOf(l.trial_id, l.metric_group, l.agent_id);
}

bool SeriesIdCache::AgentEq::operator()(const AgentKey& a,
                                        const AgentKey& b) const {
  return a == b;
}

bool SeriesIdCache::AgentEq::operator()(const AgentKey& a,
                                        const SeriesLabels& b) const {
  return std::get<0>(a) == b.trial_id && std::get<1>(a) == b.metric_group &&
         std::get<2>(a) == b.agent_id;
}

absl::string_view SeriesIdCache::Gpu(const Agent& agent, uint16_t offset) {
  return absl::string_view(agent.gpus)
      .substr(offset + 1, static_cast<uint8_t>(agent.gpus[offset]));
}

std::optional<uint16_t> SeriesIdCache::GpuOffset(Agent& agent,
                                                 absl::string_view uuid) {
  for (size_t at = 0; at < agent.gpus.size();
       at += 1 + static_cast<uint8_t>(agent.gpus[at])) {
    if (Gpu(agent, static_cast<uint16_t>(at)) == uuid) {
      return static_cast<uint16_t>(at);
    }
  }
  const size_t at = agent.gpus.size();
  if (uuid.size() > std::numeric_limits<uint8_t>::max() ||
      at > std::numeric_limits<uint16_t>::max()) {
    return std::nullopt;
  }
  agent.gpus.push_back(static_cast<char>(uuid.size()));
  agent.gpus.append(uuid.data(), uuid.size());
  agent.gpus.shrink_to_fit();  // an agent's GPUs arrive once
  return static_cast<uint16_t>(at);
}

std::vector<SeriesIdCache::Series>::const_iterator SeriesIdCache::Position(
    const Agent& agent, absl::string_view gpu, absl::string_view name) const {
  return std::lower_bound(
      agent.series.begin(), agent.series.end(), std::make_pair(gpu, name),
      [this, &agent](const Series& s,
                     const std::pair<absl::string_view, absl::string_view>& key) {
        return std::make_pair(Gpu(agent, s.gpu),
                              absl::string_view(strings_[s.name])) < key;
      });
}

bool SeriesIdCache::Matches(const Agent& agent,
                            std::vector<Series>::const_iterator it,
                            absl::string_view gpu,
                            absl::string_view name) const {
  return it != agent.series.end() && Gpu(agent, it->gpu) == gpu &&
         strings_[it->name] == name;
}

std::optional<SeriesIdCache::Entry> SeriesIdCache::Find(
    const SeriesLabels& labels) const {
  const auto agent = agents_.find(labels);
  if (agent == agents_.end()) return std::nullopt;
  const auto it = Position(agent->second, labels.gpu_uuid, labels.name);
  if (!Matches(agent->second, it, labels.gpu_uuid, labels.name)) {
    return std::nullopt;
  }
  return Entry{it->id, strings_[it->unit]};
}

std::optional<uint16_t> SeriesIdCache::Intern(absl::string_view s) {
  if (const auto it = string_index_.find(s); it != string_index_.end()) {
    return it->second;
  }
  if (strings_.size() > std::numeric_limits<uint16_t>::max()) {
    return std::nullopt;
  }
  const auto index = static_cast<uint16_t>(strings_.size());
  string_index_.emplace(strings_.emplace_back(s), index);
  return index;
}

void SeriesIdCache::Clear() {
  agents_.clear();
  strings_.clear();
  string_index_.clear();
  size_ = 0;
}

void SeriesIdCache::Insert(const SeriesLabels& labels, int64_t id,
                           absl::string_view unit) {
  if (size_ >= max_series_) Clear();
  std::optional<uint16_t> name = Intern(labels.name);
  std::optional<uint16_t> unit_index = Intern(unit);
  if (!name.has_value() || !unit_index.has_value()) {
    // More distinct names and units than 16 bits count: start afresh.
    Clear();
    name = Intern(labels.name);
    unit_index = Intern(unit);
  }
  auto agent = agents_.find(labels);
  if (agent == agents_.end()) {
    agent = agents_
                .emplace(AgentKey{labels.trial_id,
                                  std::string(labels.metric_group),
                                  std::string(labels.agent_id)},
                         Agent())
                .first;
  }
  Agent& a = agent->second;
  const auto it = Position(a, labels.gpu_uuid, labels.name);
  if (Matches(a, it, labels.gpu_uuid, labels.name)) {
    auto& found = a.series[it - a.series.begin()];
    found.id = id;
    found.unit = *unit_index;
    return;
  }
  const size_t at = it - a.series.begin();
  const std::optional<uint16_t> gpu = GpuOffset(a, labels.gpu_uuid);
  if (!gpu.has_value()) return;  // not cached: looked up each time instead
  // Grown by an eighth, not doubled: an agent's series arrive once, and
  // then its array is kept for as long as the agent sends.
  if (a.series.size() == a.series.capacity()) {
    a.series.reserve(a.series.size() + 1 + a.series.size() / 8);
  }
  a.series.insert(a.series.begin() + at,
                  Series{id, *gpu, *name, *unit_index});
  ++size_;
}

}  // namespace metrics::storage::pg
