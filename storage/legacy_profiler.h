// How the old profiler's series map to the new storage, in one place for
// the deprecated shims and for the move of old data, so both apply the same
// rule:
// - metric types: SYSTEM → group "system", TIMING → "timing", MISC → "misc";
// - names and units of system metrics: `free_memory` (GB, 10^9 bytes)
//   becomes `memory_free` in bytes; `net_throughput_sent`/`_recv` (Gbit/s)
//   keep their names in bytes/s; the other platform names keep name and
//   value and get their unit (percent, bytes, bytes/s, operations/s); any
//   other name is kept as it is, with no unit. Timing and misc series keep
//   name and value, with no unit.
// Reading through the old API applies the inverse, so an old client sees
// its own names and units. Both scales are exact in double precision for
// every float reading, so the round trip gives back the same float.
//
// Thread-safety: pure functions.
#ifndef METRICS_STORAGE_LEGACY_PROFILER_H_
#define METRICS_STORAGE_LEGACY_PROFILER_H_

#include <optional>
#include <string>

#include "absl/strings/string_view.h"

namespace metrics::storage {

// The old API's metric type names (TrialProfilerMetricLabels).
inline constexpr absl::string_view kLegacySystemType =
    "PROFILER_METRIC_TYPE_SYSTEM";
inline constexpr absl::string_view kLegacyTimingType =
    "PROFILER_METRIC_TYPE_TIMING";
inline constexpr absl::string_view kLegacyMiscType = "PROFILER_METRIC_TYPE_MISC";

// The metric group of a legacy type name; nullopt for UNSPECIFIED or an
// unknown name.
std::optional<std::string> GroupOfLegacyType(absl::string_view type);
// The legacy type name of a metric group.
std::string LegacyTypeOfGroup(absl::string_view group);

// A series as stored: name, unit, and the factor that turns a legacy value
// into a stored one.
struct StoredName {
  std::string name;
  std::string unit;
  double scale = 1;
};

// A legacy series of `group` named `legacy_name`, as stored.
StoredName FromLegacy(absl::string_view group, absl::string_view legacy_name);

// A stored series as the old API shows it: the legacy name, and `scale` to
// divide stored values by.
StoredName ToLegacy(absl::string_view group, absl::string_view name);

}  // namespace metrics::storage

#endif  // METRICS_STORAGE_LEGACY_PROFILER_H_
