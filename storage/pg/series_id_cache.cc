#include "storage/pg/series_id_cache.h"

#include <algorithm>

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

std::vector<SeriesIdCache::Series>::const_iterator SeriesIdCache::Position(
    const Agent& agent, absl::string_view gpu, absl::string_view name) {
  return std::lower_bound(
      agent.series.begin(), agent.series.end(), std::make_pair(gpu, name),
      [&agent](const Series& s,
               const std::pair<absl::string_view, absl::string_view>& key) {
        return std::make_pair(absl::string_view(agent.gpus[s.gpu]),
                              absl::string_view(*s.name)) < key;
      });
}

std::optional<SeriesIdCache::Entry> SeriesIdCache::Find(
    const SeriesLabels& labels) const {
  const auto agent = agents_.find(labels);
  if (agent == agents_.end()) return std::nullopt;
  const auto it = Position(agent->second, labels.gpu_uuid, labels.name);
  if (it == agent->second.series.end() ||
      agent->second.gpus[it->gpu] != labels.gpu_uuid ||
      *it->name != labels.name) {
    return std::nullopt;
  }
  return Entry{it->id, *it->unit};
}

const std::string* SeriesIdCache::Intern(absl::string_view s) {
  return &*strings_.emplace(s).first;
}

void SeriesIdCache::Insert(const SeriesLabels& labels, int64_t id,
                           absl::string_view unit) {
  if (size_ >= max_series_) {
    agents_.clear();
    strings_.clear();
    size_ = 0;
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
  if (it != a.series.end() && a.gpus[it->gpu] == labels.gpu_uuid &&
      *it->name == labels.name) {
    auto& found = a.series[it - a.series.begin()];
    found.id = id;
    found.unit = Intern(unit);
    return;
  }
  auto gpu = std::find(a.gpus.begin(), a.gpus.end(), labels.gpu_uuid);
  if (gpu == a.gpus.end()) gpu = a.gpus.emplace(a.gpus.end(), labels.gpu_uuid);
  a.series.insert(a.series.begin() + (it - a.series.begin()),
                  Series{static_cast<uint32_t>(gpu - a.gpus.begin()),
                         Intern(labels.name), Intern(unit), id});
  ++size_;
}

}  // namespace metrics::storage::pg
