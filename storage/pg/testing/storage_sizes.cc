#include "storage/pg/testing/storage_sizes.h"

#include <pqxx/connection>
#include <pqxx/nontransaction>
#include <pqxx/result>

#include "absl/strings/str_cat.h"
#include "storage/pg/pg_errors.h"

namespace metrics::storage::pg::test_util {

namespace {

constexpr char kBaseline[] = "storage_bench_baseline";

int64_t Scalar(pqxx::nontransaction& tx, const std::string& sql) {
  const pqxx::result r = tx.exec(sql);
  return r.empty() || r[0][0].is_null() ? 0 : r[0][0].as<int64_t>();
}

// Heap (main fork), TOAST (table and index) and index bytes of `table`.
void Measure(pqxx::nontransaction& tx, const std::string& table,
             int64_t& heap, int64_t& toast, int64_t& indexes) {
  const std::string rel = tx.quote(table);
  heap = Scalar(tx, absl::StrCat("SELECT pg_relation_size(", rel, ")"));
  toast = Scalar(tx, absl::StrCat(
                         "SELECT pg_total_relation_size(reltoastrelid) FROM "
                         "pg_class WHERE oid = ",
                         rel, "::regclass AND reltoastrelid <> 0"));
  indexes = Scalar(tx, absl::StrCat("SELECT pg_indexes_size(", rel, ")"));
}

}  // namespace

absl::StatusOr<StorageSizes> MeasureStorage(const std::string& url,
                                            Baseline measure_baseline) {
  return GuardPg("measuring storage", [&]() -> absl::StatusOr<StorageSizes> {
    pqxx::connection conn(url);
    pqxx::nontransaction tx(conn);
    const std::string baseline = kBaseline;
    const bool with_baseline = measure_baseline == Baseline::kMeasure;
    tx.exec(absl::StrCat("DROP TABLE IF EXISTS ", baseline));
    if (with_baseline) {
      // The layout as it was before migration 0004: the row with its values
      // as jsonb (as metrics_unpacked gives them), never compressed
      // (EXTERNAL), under the primary key of then.
      tx.exec(absl::StrCat("CREATE TABLE ", baseline,
                           " (LIKE metrics_profiling INCLUDING DEFAULTS)"));
      tx.exec(absl::StrCat("ALTER TABLE ", baseline,
                           " DROP COLUMN packed_values, DROP COLUMN sealed_values, "
                           "ALTER COLUMN metrics SET NOT NULL, "
                           "ALTER COLUMN metrics SET STORAGE EXTERNAL, "
                           "ADD PRIMARY KEY (trial_id, metric_group, agent_id, "
                           "end_time, id, partition_type)"));
      tx.exec(absl::StrCat(
          "INSERT INTO ", baseline,
          " SELECT trial_id, id, partition_type, metric_group, agent_id, "
          "end_time, total_batches, metrics FROM metrics_unpacked "
          "WHERE partition_type = 'PROFILING'"));
    }
    tx.exec("VACUUM ANALYZE");
    StorageSizes sizes;
    sizes.raw_rows = Scalar(tx, "SELECT count(*) FROM metrics_profiling");
    sizes.reports = Scalar(
        tx, "SELECT coalesce(sum(CASE WHEN sealed_values IS NULL THEN 1 ELSE "
            "(SELECT count(*) FROM metrics_sealed_times(sealed_values)) END), 0) "
            "FROM metrics_profiling");
    sizes.sealed_rows =
        Scalar(tx, "SELECT count(*) FROM metrics_profiling WHERE sealed_values IS NOT NULL");
    sizes.raw_values_bytes = Scalar(
        tx, "SELECT sum(coalesce(pg_column_size(packed_values), "
            "pg_column_size(sealed_values), pg_column_size(metrics))) FROM metrics_profiling");
    Measure(tx, "metrics_profiling", sizes.raw_heap, sizes.raw_toast,
            sizes.raw_indexes);
    if (with_baseline) {
      Measure(tx, baseline, sizes.baseline_heap, sizes.baseline_toast,
              sizes.baseline_indexes);
    }
    sizes.rollups =
        Scalar(tx, "SELECT pg_total_relation_size('system_rollups')");
    sizes.rollup_indexes =
        Scalar(tx, "SELECT pg_indexes_size('system_rollups')");
    for (const auto& row : tx.exec(
             "SELECT width_s, count(*), sum(pg_column_size(stats)) FROM "
             "system_rollups GROUP BY width_s ORDER BY width_s")) {
      sizes.rollup_widths.push_back({row[0].as<int>(), row[1].as<int64_t>(),
                                     row[2].as<int64_t>()});
    }
    sizes.registry = Scalar(
        tx,
        "SELECT pg_total_relation_size('series') + "
        "pg_total_relation_size('trial_series_counts') + "
        "pg_total_relation_size('ingest_positions')");
    if (with_baseline) tx.exec(absl::StrCat("DROP TABLE ", baseline));
    return sizes;
  });
}

}  // namespace metrics::storage::pg::test_util
