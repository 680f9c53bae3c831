#include "storage/pg/jobs/legacy_move.h"

#include <pqxx/result>
#include <pqxx/transaction>

#include <cmath>
#include <map>
#include <memory>
#include <optional>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/status_macros.h"
#include "storage/batch_builder.h"
#include "storage/batch_group.h"
#include "storage/legacy_profiler.h"
#include "storage/metric_store.h"
#include "storage/pg/connection.h"
#include "storage/pg/pg_errors.h"
#include "storage/pg/pg_metric_store.h"
#include "storage/pg/sql_time.h"

namespace metrics::storage::pg {

namespace {

constexpr size_t kMaxRefusalsListed = 100;

// The labels of a legacy row, written by the old gateway as protojson
// (lowerCamelCase); snake_case is read too.
constexpr char kLabelColumns[] =
    "coalesce(labels->>'trialId', labels->>'trial_id', ''), "
    "coalesce(labels->>'name', ''), "
    "coalesce(labels->>'agentId', labels->>'agent_id', ''), "
    "coalesce(labels->>'gpuUuid', labels->>'gpu_uuid', ''), "
    "coalesce(labels->>'metricType', labels->>'metric_type', '')";

constexpr char kTrialIdText[] =
    "coalesce(labels->>'trialId', labels->>'trial_id')";

struct LegacyRow {
  int64_t id = 0;
  std::string trial_text, name, agent_id, gpu_uuid, type;
  std::vector<float> values;
  std::vector<int32_t> batches;
  std::vector<int64_t> times_us;
  bool malformed = false;  // NULL elements or arrays of unequal length
};

// The old API wrote metric types by name; numbers are accepted too.
std::optional<std::string> GroupOf(const std::string& type) {
  if (type == "1") return GroupOfLegacyType(kLegacySystemType);
  if (type == "2") return GroupOfLegacyType(kLegacyTimingType);
  if (type == "3") return GroupOfLegacyType(kLegacyMiscType);
  return GroupOfLegacyType(type);
}

absl::StatusOr<std::vector<LegacyRow>> ReadChunk(pqxx::connection& conn,
                                                 int64_t after_id,
                                                 int64_t last_id, int limit) {
  return GuardPg("reading trial_profiler_metrics", [&]()
                     -> absl::StatusOr<std::vector<LegacyRow>> {
    pqxx::read_transaction tx(conn);
    std::vector<LegacyRow> rows;
    // One result row per reading (unnest pads unequal arrays with NULLs);
    // a legacy row without readings comes once, with NULLs.
    for (const auto& r : tx.exec_params(
             absl::StrCat(
                 "SELECT m.id, ", kLabelColumns,
                 ", u.v::text, u.b, ", EpochMicrosSql("u.t"),
                 " FROM (SELECT * FROM trial_profiler_metrics "
                 "WHERE id > $1 AND id <= $2 ORDER BY id LIMIT $3) m "
                 "LEFT JOIN LATERAL unnest(m.values, m.batches, m.ts) "
                 "WITH ORDINALITY AS u(v, b, t, n) ON true "
                 "ORDER BY m.id, u.n"),
             after_id, last_id, limit)) {
      const int64_t id = r[0].as<int64_t>();
      if (rows.empty() || rows.back().id != id) {
        LegacyRow row;
        row.id = id;
        row.trial_text = r[1].as<std::string>();
        row.name = r[2].as<std::string>();
        row.agent_id = r[3].as<std::string>();
        row.gpu_uuid = r[4].as<std::string>();
        row.type = r[5].as<std::string>();
        rows.push_back(std::move(row));
      }
      LegacyRow& row = rows.back();
      const bool no_value = r[6].is_null(), no_batch = r[7].is_null(),
                 no_time = r[8].is_null();
      if (no_value && no_batch && no_time) continue;  // no readings at all
      float value = 0;
      if (no_value || no_batch || no_time ||
          !absl::SimpleAtof(r[6].as<std::string>(), &value)) {
        row.malformed = true;
        continue;
      }
      row.values.push_back(value);
      row.batches.push_back(r[7].as<int32_t>());
      row.times_us.push_back(r[8].as<int64_t>());
    }
    return rows;
  });
}

struct Totals {
  int64_t rows = 0;
  int64_t last_id = 0;
  int64_t trials = 0;
  int64_t trials_missing = 0;
  int64_t rows_with_position = 0;
  int64_t readings = 0;
};

absl::StatusOr<Totals> ReadTotals(pqxx::connection& conn) {
  return GuardPg("counting trial_profiler_metrics",
                 [&]() -> absl::StatusOr<Totals> {
    pqxx::read_transaction tx(conn);
    Totals t;
    const pqxx::row counts = tx.exec1(
        "SELECT count(*), coalesce(max(id), 0), "
        "coalesce(sum(cardinality(values)), 0) FROM trial_profiler_metrics");
    t.rows = counts[0].as<int64_t>();
    t.last_id = counts[1].as<int64_t>();
    t.readings = counts[2].as<int64_t>();
    const pqxx::row trials = tx.exec1(absl::StrCat(
        "SELECT count(*), count(*) FILTER (WHERE NOT EXISTS "
        "(SELECT 1 FROM trials WHERE trials.id = l.t)) FROM "
        "(SELECT DISTINCT (", kTrialIdText, ")::int AS t "
        "FROM trial_profiler_metrics WHERE ", kTrialIdText,
        " ~ '^[0-9]{1,9}$') l"));
    t.trials = trials[0].as<int64_t>();
    t.trials_missing = trials[1].as<int64_t>();
    t.rows_with_position =
        tx.exec1("SELECT count(*) FROM ingest_positions "
                 "WHERE stream_id LIKE 'legacy-move/%'")[0]
            .as<int64_t>();
    return t;
  });
}

// Registers the legacy table's unknown trials as COMPLETED.
absl::StatusOr<int64_t> CreateMissingTrials(pqxx::connection& conn) {
  return GuardPg("registering the legacy trials",
                 [&]() -> absl::StatusOr<int64_t> {
    pqxx::work tx(conn);
    const pqxx::result created = tx.exec(absl::StrCat(
        "INSERT INTO trials (id, state, ended_at) "
        "SELECT DISTINCT (", kTrialIdText, ")::int, 'COMPLETED', now() "
        "FROM trial_profiler_metrics WHERE ", kTrialIdText,
        " ~ '^[0-9]{1,9}$' AND (", kTrialIdText, ")::int > 0 "
        "ON CONFLICT (id) DO NOTHING RETURNING id"));
    tx.commit();
    return static_cast<int64_t>(created.size());
  });
}

// A legacy row as ingest batches (sequences 1, 2, ... of its stream), or
// why it cannot be moved. The same row always gives the same batches, so a
// move run again finds its positions. Each reading is its own report (a
// row is one series): readings of one instant are all kept.
absl::StatusOr<std::vector<MetricBatch>> ToBatches(const LegacyRow& row,
                                                   int64_t& not_finite) {
  int32_t trial_id = 0;
  if (!absl::SimpleAtoi(row.trial_text, &trial_id) || trial_id <= 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "labels.trialId \"", row.trial_text, "\" is not a trial id"));
  }
  const std::optional<std::string> group = GroupOf(row.type);
  if (!group.has_value()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "labels.metricType \"", row.type, "\" is not SYSTEM, TIMING or MISC"));
  }
  if (row.malformed) {
    return absl::InvalidArgumentError(
        "values, batches and ts have unequal lengths or NULL elements");
  }
  const StoredName stored = FromLegacy(*group, row.name);
  BatchBuilder builder(IngestLimits(), absl::Now());
  for (size_t i = 0; i < row.values.size(); ++i) {
    if (!std::isfinite(row.values[i])) {
      ++not_finite;
      continue;
    }
    if (absl::Status added = builder.Add(
            {trial_id, row.agent_id, *group},
            {stored.name, row.gpu_uuid, stored.unit, row.times_us[i],
             row.batches[i], static_cast<double>(row.values[i]) * stored.scale});
        !added.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("reading ", i, ": ", added.message()));
    }
  }
  std::vector<MetricBatch> batches = std::move(builder).Take();
  for (size_t b = 0; b < batches.size(); ++b) {
    batches[b].stream_id = absl::StrCat("legacy-move/", row.id);
    batches[b].sequence = static_cast<int64_t>(b) + 1;
    batches[b].backfill = true;
  }
  return batches;
}

// What became of each row's batches.
struct RowOutcome {
  int stored = 0;
  int64_t readings_stored = 0;
  int duplicate = 0;
  absl::Status refused;
  absl::Status failed;
};

}  // namespace

absl::StatusOr<LegacyMoveSummary> MoveLegacyProfilerData(
    const LegacyMoveOptions& options) {
  ASSIGN_OR_RETURN(std::unique_ptr<pqxx::connection> conn,
                   Connect(options.database_url, "metricsctl legacy move"));
  ASSIGN_OR_RETURN(Totals totals, ReadTotals(*conn));
  LegacyMoveSummary summary;
  summary.trials = totals.trials;
  if (options.dry_run) {
    summary.rows = totals.rows;
    summary.rows_already = totals.rows_with_position;
    summary.rows_moved = totals.rows - totals.rows_with_position;
    summary.readings = totals.readings;
    summary.trials_created = totals.trials_missing;
    return summary;
  }
  ASSIGN_OR_RETURN(summary.trials_created, CreateMissingTrials(*conn));

  PgMetricStoreOptions store_options;
  store_options.database_url = options.database_url;
  std::unique_ptr<PgMetricStore> store =
      PgMetricStore::Create(std::move(store_options));

  LegacyMoveProgress progress;
  progress.rows_total = totals.rows;
  int64_t after_id = 0;
  absl::Status error;
  while (error.ok()) {
    if (options.interrupted && options.interrupted()) {
      summary.interrupted = true;
      break;
    }
    absl::StatusOr<std::vector<LegacyRow>> rows =
        ReadChunk(*conn, after_id, totals.last_id, options.rows_per_chunk);
    if (!rows.ok()) {
      error = rows.status();
      break;
    }
    if (rows->empty()) break;
    after_id = rows->back().id;

    // Each row's entry is made here, before its batches go out; outcomes
    // then write only to their row's entry, one at a time (BatchGroup).
    std::map<int64_t, RowOutcome> outcomes;
    {
      BatchGroup group(*store, /*wait_for_room=*/true);
      for (const LegacyRow& row : *rows) {
        ++summary.rows;
        absl::StatusOr<std::vector<MetricBatch>> batches =
            ToBatches(row, summary.readings_not_finite);
        if (!batches.ok()) {
          outcomes[row.id].refused = batches.status();
          continue;
        }
        // A row without readings is moved as it is.
        RowOutcome* o = &outcomes[row.id];
        for (MetricBatch& batch : *batches) {
          const auto n = static_cast<int64_t>(batch.reports.size());
          group.Submit(std::move(batch), [o, n](const BatchOutcome& outcome) {
            switch (outcome.kind) {
              case BatchOutcome::Kind::kStored:
                ++o->stored;
                o->readings_stored += n;
                break;
              case BatchOutcome::Kind::kDuplicate:
                ++o->duplicate;
                break;
              case BatchOutcome::Kind::kRejected:
                o->refused = outcome.status;
                break;
              case BatchOutcome::Kind::kFailed:
                o->failed = outcome.status;
                break;
            }
          });
        }
      }
      group.Wait();
    }
    for (const auto& [id, o] : outcomes) {
      if (!o.failed.ok()) {
        if (error.ok()) {
          error = absl::Status(o.failed.code(),
                               absl::StrCat("moving row ", id, ": ",
                                            o.failed.message()));
        }
      } else if (!o.refused.ok()) {
        ++summary.rows_refused;
        if (summary.refusals.size() < kMaxRefusalsListed) {
          summary.refusals.push_back(
              absl::StrCat("row ", id, ": ", o.refused.message()));
        }
      } else if (o.stored == 0 && o.duplicate > 0) {
        ++summary.rows_already;
      } else {
        ++summary.rows_moved;
      }
      summary.readings += o.readings_stored;
    }
    progress.rows_done = summary.rows;
    progress.readings_done = summary.readings;
    if (options.progress) options.progress(progress);
  }
  store->Shutdown(absl::Now() + absl::Seconds(30));
  if (!error.ok()) return error;
  return summary;
}

}  // namespace metrics::storage::pg
