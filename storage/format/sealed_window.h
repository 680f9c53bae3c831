// The sealed form of one agent's closed window of time: every report of the
// window (its time and values by series id), stored as columns compressed
// along time, so a window of a minute or more costs about 3 bytes a value
// where a row a report costs 10 (docs/benchmarks.md, "Storage").
//
// Format 1: a version byte (1), a varint of the report count N, the times
// (the first as a zigzag varint, then each difference from the previous
// difference, zigzag), a varint of the column count, then per column in
// ascending id: a varint of (id - previous id, the first from -1; column 0
// holds the reports' training batch indexes, where they have one, and
// columns from 1 on a series each), a varint of how many
// reports have a value of it (C) and, when C < N, a bitmap of N bits saying
// which (least significant bit first), a kind byte, a varint of the
// payload's length and the payload. Kind 0 is an XOR stream (Gorilla,
// VLDB 2015): the first value's 64 bits, then for each value a 0 bit when
// it repeats the previous one, else 10 and its meaningful XOR bits within
// the previous window, or 11, 5 bits of leading zeros, 6 of length minus
// one and the bits; bits are written most significant first. Kinds 1 to 7
// are exact decimals of kind - 1 places: the zigzag varint of the first
// value's digits, then of each difference, every value the double nearest
// to digits / 10^places. The encoder keeps whichever is shorter, and a
// decimal only when every value reads back bit for bit.
//
// Thread-safety: pure functions.
#ifndef METRICS_STORAGE_FORMAT_SEALED_WINDOW_H_
#define METRICS_STORAGE_FORMAT_SEALED_WINDOW_H_

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "storage/format/packed_report.h"

namespace metrics::storage {

// The length of a sealed window; windows are aligned to multiples of it
// since the epoch. Ten minutes: at a report a second, a window's fixed
// costs (its row, its times' first entries) are under a tenth of a byte a
// value, and what readers add from raw rows stays a few hundred rows an
// agent (docs/storage.md, "Sealed windows").
inline constexpr int kSealedWindowSeconds = 600;

struct WindowReport {
  WindowReport() = default;
  WindowReport(int64_t time, std::vector<SeriesValue> v,
               std::optional<int32_t> b = std::nullopt)
      : time_us(time), values(std::move(v)), batch(b) {}

  int64_t time_us = 0;
  std::vector<SeriesValue> values;  // ascending, positive series ids
  // The training batch index the row had (metrics.total_batches), if any.
  std::optional<int32_t> batch;

  bool operator==(const WindowReport& o) const;
};

// REQUIRES: each report's values sorted by strictly ascending, positive
// series id. Reports keep their order (a window's raw rows in time, then
// ingest order).
std::string SealWindow(const std::vector<WindowReport>& reports);

// The reports as they were sealed, values bit for bit. DATA_LOSS for bytes
// that are not SealWindow's output.
absl::StatusOr<std::vector<WindowReport>> UnsealWindow(absl::string_view bytes);

// The number of reports in a sealed window, read from its first bytes (at
// least 11 of them, or all): what a reader can learn of a window's size
// without decoding it. DATA_LOSS for bytes that do not start as
// SealWindow's output does.
absl::StatusOr<int64_t> SealedReportCount(absl::string_view head);

// The time of the first report of a sealed window, its earliest, read from
// its first bytes (at least kSealedHeadBytes of them, or all): where a
// reader paging through a window's parts can skip a part without fetching
// it. DATA_LOSS for bytes that do not start as SealWindow's output does, or
// a window of no reports.
inline constexpr int kSealedHeadBytes = 24;
absl::StatusOr<int64_t> SealedFirstTime(absl::string_view head);

}  // namespace metrics::storage

#endif  // METRICS_STORAGE_FORMAT_SEALED_WINDOW_H_
