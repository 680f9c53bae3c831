#include "storage/pg/ingest/series_resolver.h"

#include <pqxx/result>

#include <stdexcept>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "storage/pg/sql_arrays.h"

namespace metrics::storage::pg {

namespace {

struct ResolverStatements {
  // A probe of the labels' unique key per series. As a join, once the
  // statement's generic plan was in use, the planner hashed the keys and
  // scanned the whole registry: 60 ms a look-up at 175 000 series
  // (docs/benchmarks.md, "Statements that stay index probes"). The LIMIT
  // (the key is unique) keeps
  // the subquery from being flattened into that join.
  PreparedStatement look_up{
      "series_look_up",
      "SELECT s.series_id, s.trial_id, s.metric_group, s.agent_id, "
      "s.gpu_uuid, s.name, s.unit "
      "FROM unnest($1::int[], $2::text[], $3::text[], $4::text[], "
      "$5::text[]) AS k(trial_id, metric_group, agent_id, gpu_uuid, name) "
      "CROSS JOIN LATERAL (SELECT * FROM series s "
      "WHERE s.trial_id = k.trial_id AND s.metric_group = k.metric_group "
      "AND s.agent_id = k.agent_id AND s.gpu_uuid = k.gpu_uuid "
      "AND s.name = k.name LIMIT 1) s"};
  // A row another transaction inserts concurrently makes ON CONFLICT wait
  // for it and then skip ours; the look-up then reads the committed row.
  PreparedStatement insert{
      "series_insert",
      "INSERT INTO series (trial_id, metric_group, agent_id, gpu_uuid, "
      "name, unit) "
      "SELECT t, g, a, u, n, un FROM unnest($1::int[], $2::text[], "
      "$3::text[], $4::text[], $5::text[], $6::text[]) "
      "WITH ORDINALITY AS k(t, g, a, u, n, un, o) ORDER BY o "
      "ON CONFLICT (trial_id, metric_group, agent_id, gpu_uuid, name) "
      "DO NOTHING RETURNING series_id, trial_id, metric_group, agent_id, "
      "gpu_uuid, name, unit"};
  PreparedStatement lock_count{
      "series_lock_count",
      "INSERT INTO trial_series_counts AS c (trial_id, series_count) "
      "VALUES ($1, 0) ON CONFLICT (trial_id) "
      "DO UPDATE SET series_count = c.series_count "
      "RETURNING series_count"};
  PreparedStatement peek_count{
      "series_peek_count",
      "SELECT series_count FROM trial_series_counts WHERE trial_id = $1"};
  PreparedStatement add_count{
      "series_add_count",
      "INSERT INTO trial_series_counts AS c (trial_id, series_count) "
      "VALUES ($1, $2) ON CONFLICT (trial_id) "
      "DO UPDATE SET series_count = c.series_count + $2 "
      "RETURNING series_count"};
};

const ResolverStatements& ResolverSql() {
  static const auto* statements = new ResolverStatements();
  return *statements;
}

absl::Status DifferentUnit(const MetricBatch& batch, size_t i,
                           absl::string_view registered) {
  const SeriesDeclaration& s = batch.series[i];
  return absl::InvalidArgumentError(absl::StrCat(
      "batch.series[", i, "].unit: \"", s.unit, "\" differs from \"",
      registered, "\", the unit series \"", s.name, "\"",
      s.gpu_uuid.empty() ? "" : " of GPU ", s.gpu_uuid, " of agent ",
      batch.agent_id, " was registered with"));
}

// Labels are printable (batch validation), so the separator is unambiguous.
std::string SeriesKey(int32_t trial, absl::string_view group,
                      absl::string_view agent, absl::string_view gpu,
                      absl::string_view name) {
  return absl::StrCat(trial, "\x1f", group, "\x1f", agent, "\x1f", gpu,
                      "\x1f", name);
}

std::string KeyOf(const MetricBatch& batch, size_t i) {
  return SeriesKey(batch.trial_id, batch.metric_group, batch.agent_id,
                   batch.series[i].gpu_uuid, batch.series[i].name);
}

SeriesLabels LabelsOf(const MetricBatch& batch, size_t i) {
  return {batch.trial_id, batch.metric_group, batch.agent_id,
          batch.series[i].gpu_uuid, batch.series[i].name};
}

}  // namespace

SeriesResolver::SeriesResolver(pqxx::work& tx, const SeriesIdCache& cache,
                               int max_series_per_trial,
                               bool lock_counts_early)
    : tx_(tx),
      cache_(cache),
      max_series_per_trial_(max_series_per_trial),
      lock_counts_early_(lock_counts_early) {}

std::vector<PreparedStatement> SeriesResolver::Statements() {
  const struct ResolverStatements& s = ResolverSql();
  return {s.look_up, s.insert, s.lock_count, s.peek_count, s.add_count};
}

std::optional<SeriesIdCache::Entry> SeriesResolver::Find(
    const MetricBatch& batch, size_t i) const {
  if (auto cached = cache_.Find(LabelsOf(batch, i))) return cached;
  if (found_.empty()) return std::nullopt;
  const auto it = found_.find(KeyOf(batch, i));
  if (it == found_.end()) return std::nullopt;
  return SeriesIdCache::Entry{it->second.id, it->second.unit};
}

void SeriesResolver::Read(const std::vector<int64_t>& trials,
                          const std::vector<std::string>& groups,
                          const std::vector<std::string>& agents,
                          const std::vector<std::string>& gpus,
                          const std::vector<std::string>& names) {
  if (trials.empty()) return;
  for (const auto& row : tx_.exec_prepared(
           ResolverSql().look_up.name, IntArray(trials), TextArray(groups),
           TextArray(agents), TextArray(gpus), TextArray(names))) {
    Remember(row);
  }
}

void SeriesResolver::Remember(const pqxx::row& row) {
  FoundSeries f{row[1].as<int32_t>(),      row[2].as<std::string>(),
                row[3].as<std::string>(),  row[4].as<std::string>(),
                row[5].as<std::string>(),  row[6].as<std::string>(),
                row[0].as<int64_t>()};
  std::string key =
      SeriesKey(f.trial_id, f.metric_group, f.agent_id, f.gpu_uuid, f.name);
  found_.insert_or_assign(std::move(key), std::move(f));
}

void SeriesResolver::LookUp(const std::vector<const MetricBatch*>& batches) {
  std::vector<int64_t> trials;
  std::vector<std::string> groups, agents, gpus, names;
  absl::flat_hash_set<std::string> asked;
  for (const MetricBatch* batch : batches) {
    for (size_t i = 0; i < batch->series.size(); ++i) {
      if (cache_.Find(LabelsOf(*batch, i)).has_value() ||
          !asked.insert(KeyOf(*batch, i)).second) {
        continue;
      }
      trials.push_back(batch->trial_id);
      groups.push_back(batch->metric_group);
      agents.push_back(batch->agent_id);
      gpus.push_back(batch->series[i].gpu_uuid);
      names.push_back(batch->series[i].name);
    }
  }
  Read(trials, groups, agents, gpus, names);
}

int64_t SeriesResolver::Registered(int32_t trial_id) {
  auto [it, inserted] = counted_.try_emplace(trial_id, 0);
  if (inserted) {
    if (lock_counts_early_) {
      it->second = tx_.exec_prepared(ResolverSql().lock_count.name, trial_id)[0][0]
                       .as<int64_t>();
    } else {
      const pqxx::result row =
          tx_.exec_prepared(ResolverSql().peek_count.name, trial_id);
      it->second = row.empty() ? 0 : row[0][0].as<int64_t>();
    }
  }
  const auto planned = planned_per_trial_.find(trial_id);
  return it->second +
         (planned == planned_per_trial_.end() ? 0 : planned->second);
}

absl::Status SeriesResolver::Resolve(const MetricBatch& batch,
                                     std::vector<int64_t>& ids) {
  const size_t n = batch.series.size();
  ids.assign(n, 0);
  std::vector<std::pair<size_t, std::string>> missing;
  for (size_t i = 0; i < n; ++i) {
    if (const auto known = Find(batch, i)) {
      if (known->unit != batch.series[i].unit) {
        return DifferentUnit(batch, i, known->unit);
      }
      ids[i] = known->id;
      continue;
    }
    std::string key = KeyOf(batch, i);
    if (auto it = planned_index_.find(key); it != planned_index_.end()) {
      const auto& [declarer, index] = planned_[it->second];
      if (declarer->series[index].unit != batch.series[i].unit) {
        return DifferentUnit(batch, i, declarer->series[index].unit);
      }
    } else {
      missing.emplace_back(i, std::move(key));
    }
  }
  if (missing.empty()) return absl::OkStatus();
  const int64_t registered = Registered(batch.trial_id);
  if (registered + static_cast<int64_t>(missing.size()) >
      max_series_per_trial_) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "batch.series: trial ", batch.trial_id, " has ", registered,
        " series and this batch adds ", missing.size(),
        "; the limit per trial is ", max_series_per_trial_));
  }
  planned_per_trial_[batch.trial_id] += static_cast<int64_t>(missing.size());
  for (auto& [i, key] : missing) {
    planned_index_.emplace(std::move(key), planned_.size());
    planned_.emplace_back(&batch, i);
  }
  return absl::OkStatus();
}

void SeriesResolver::Register() {
  if (planned_.empty()) return;
  // Two metricsd registering one agent's series at once wait on each other
  // in a cycle only if the agent declared them in different orders; the
  // deadlock is then detected and the group retried.
  std::vector<int64_t> trials;
  std::vector<std::string> groups, agents, gpus, names, units;
  for (const auto& [batch, i] : planned_) {
    trials.push_back(batch->trial_id);
    groups.push_back(batch->metric_group);
    agents.push_back(batch->agent_id);
    gpus.push_back(batch->series[i].gpu_uuid);
    names.push_back(batch->series[i].name);
    units.push_back(batch->series[i].unit);
  }
  for (const auto& row : tx_.exec_prepared(
           ResolverSql().insert.name, IntArray(trials), TextArray(groups),
           TextArray(agents), TextArray(gpus), TextArray(names),
           TextArray(units))) {
    Remember(row);
    ++inserted_per_trial_[row[1].as<int32_t>()];
  }
  std::vector<int64_t> other_trials;
  std::vector<std::string> other_groups, other_agents, other_gpus, other_names;
  for (size_t p = 0; p < planned_.size(); ++p) {
    if (found_.contains(KeyOf(*planned_[p].first, planned_[p].second))) {
      continue;
    }
    other_trials.push_back(trials[p]);
    other_groups.push_back(groups[p]);
    other_agents.push_back(agents[p]);
    other_gpus.push_back(gpus[p]);
    other_names.push_back(names[p]);
  }
  Read(other_trials, other_groups, other_agents, other_gpus, other_names);
}

absl::Status SeriesResolver::Complete(const MetricBatch& batch,
                                      std::vector<int64_t>& ids) const {
  for (size_t i = 0; i < ids.size(); ++i) {
    if (ids[i] != 0) continue;
    const auto it = found_.find(KeyOf(batch, i));
    if (it == found_.end()) {
      throw std::logic_error(absl::StrCat(
          "series \"", batch.series[i].name, "\" missing after its insert"));
    }
    if (it->second.unit != batch.series[i].unit) {
      return DifferentUnit(batch, i, it->second.unit);
    }
    ids[i] = it->second.id;
  }
  return absl::OkStatus();
}

bool SeriesResolver::AddCounts() {
  // In trial order, so two writers never wait on each other in a cycle.
  for (const auto& [trial_id, inserted] : inserted_per_trial_) {
    const int64_t total =
        tx_.exec_prepared(ResolverSql().add_count.name, trial_id, inserted)[0][0]
            .as<int64_t>();
    if (!lock_counts_early_ && total > max_series_per_trial_) return false;
  }
  return true;
}

}  // namespace metrics::storage::pg
