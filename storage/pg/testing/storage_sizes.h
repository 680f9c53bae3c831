// For bench/storage.sh: what the system metrics take on disk, by part, after
// VACUUM ANALYZE, next to a baseline: the same raw rows in a table of the
// layout as it was before migration 0004 packed the values: one jsonb per
// report, stored uncompressed, with the same primary key.
//
// Thread-safety: functions of their arguments; each opens its connection.
#ifndef METRICS_STORAGE_PG_TESTING_STORAGE_SIZES_H_
#define METRICS_STORAGE_PG_TESTING_STORAGE_SIZES_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace metrics::storage::pg::test_util {

// Bytes on disk (every fork but the free space and visibility maps).
struct StorageSizes {
  int64_t raw_rows = 0;        // rows of the profiling partition
  int64_t reports = 0;         // reports they hold (a sealed window holds many)
  int64_t sealed_rows = 0;     // of the rows, sealed windows
  int64_t raw_values_bytes = 0;  // the values (packed_values, sealed_values or metrics)
  int64_t raw_heap = 0;        // the profiling partition's table
  int64_t raw_toast = 0;       // its TOAST table and index
  int64_t raw_indexes = 0;     // its indexes
  int64_t rollups = 0;         // system_rollups: table, TOAST, indexes
  int64_t rollup_indexes = 0;  // of it, the indexes
  // The packed stats of each rollup width (their column's bytes, not the
  // rows' overhead or free space): {width_s, rows, bytes}, finest first.
  struct Width {
    int width_s = 0;
    int64_t rows = 0;
    int64_t stats_bytes = 0;
  };
  std::vector<Width> rollup_widths;
  int64_t registry = 0;        // series, trial_series_counts, ingest_positions
  int64_t baseline_heap = 0;   // the baseline's table, TOAST and index, alike
  int64_t baseline_toast = 0;
  int64_t baseline_indexes = 0;
};

enum class Baseline {
  kMeasure,  // copy the raw rows into the baseline table and measure it
  kSkip,     // leave the baseline_* fields 0 (a copy of millions of rows costs minutes)
};

// Vacuums and analyses the database, copies the profiling partition's rows
// into the baseline table (made and vacuumed here, dropped after) unless
// told to skip it, and measures both.
absl::StatusOr<StorageSizes> MeasureStorage(
    const std::string& url, Baseline baseline = Baseline::kMeasure);

}  // namespace metrics::storage::pg::test_util

#endif  // METRICS_STORAGE_PG_TESTING_STORAGE_SIZES_H_
