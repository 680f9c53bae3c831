// The packed form of one report's values, as the `packed_values` column of
// the generic `metrics` table holds them (migration 0004): the values keyed
// by their series' registry id instead of by name and GPU UUID, each in as
// few bytes as its precision allows (value_codec.h). About 5 bytes a value
// for what an agent reports, against 53 in the jsonb it replaces.
//
// Format 1: a version byte (1), then per value in ascending series id: a
// varint of (id - previous id) << 4 | kind (the previous id of the first is
// 0), then the value's payload. SQL reads it with the functions of
// migrations/sql/0004_packed_values.up.sql (metrics_unpacked, the view most
// readers want).
//
// Format 2 is format 1 with version byte 2: a report whose values are not in
// the rollups yet. Ingest writes format 2 and the sealer adds a window's
// format-2 reports to the rollups as it seals them (docs/storage.md,
// "Rollups"); readers of rollups add the format-2 rows still waiting.
//
// Thread-safety: pure functions.
#ifndef METRICS_STORAGE_FORMAT_PACKED_REPORT_H_
#define METRICS_STORAGE_FORMAT_PACKED_REPORT_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace metrics::storage {

// (series id, value)
using SeriesValue = std::pair<int64_t, double>;

// Whether a report's values are in the rollups already (format 1) or wait
// for the sealer to add them (format 2).
enum class RollupState { kInRollups = 1, kPending = 2 };

// REQUIRES: `values` sorted by strictly ascending, positive series id.
std::string PackReport(const std::vector<SeriesValue>& values,
                       RollupState state = RollupState::kInRollups);
// The same into `out` (cleared first), so a writer packing many reports
// reuses one buffer.
void PackReportInto(const std::vector<SeriesValue>& values, std::string& out,
                    RollupState state = RollupState::kInRollups);

// Every value, in ascending series id, of either format. DATA_LOSS for
// bytes that are not PackReport's output.
absl::StatusOr<std::vector<SeriesValue>> UnpackReport(absl::string_view bytes);

// Whether packed bytes are format 2 (not yet in the rollups).
inline bool IsPendingReport(absl::string_view bytes) {
  return !bytes.empty() && bytes[0] == static_cast<char>(RollupState::kPending);
}

}  // namespace metrics::storage

#endif  // METRICS_STORAGE_FORMAT_PACKED_REPORT_H_
