// Fuzz target: the decoders of the packed stored formats (raw report
// values, rollup buckets) over any bytes, as a damaged or hand-edited
// database could hold them. They must refuse or decode, never crash; what
// they decode must encode and decode again to the same values, bit for bit.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>

#include "absl/strings/string_view.h"
#include "storage/format/packed_report.h"
#include "storage/format/rollup_codec.h"

namespace {

bool Same(double a, double b) { return std::memcmp(&a, &b, sizeof a) == 0; }

void CheckReport(absl::string_view bytes) {
  auto values = metrics::storage::UnpackReport(bytes);
  if (!values.ok()) return;
  auto again =
      metrics::storage::UnpackReport(metrics::storage::PackReport(*values));
  if (!again.ok() || again->size() != values->size()) __builtin_trap();
  for (size_t i = 0; i < values->size(); ++i) {
    if ((*again)[i].first != (*values)[i].first ||
        !Same((*again)[i].second, (*values)[i].second)) {
      __builtin_trap();
    }
  }
}

void CheckRollup(absl::string_view bytes, int64_t start_us) {
  auto rollup = metrics::storage::DecodeAgentRollup(bytes, start_us);
  if (!rollup.ok()) return;
  auto again = metrics::storage::DecodeAgentRollup(
      metrics::storage::EncodeAgentRollup(*rollup, start_us), start_us);
  if (!again.ok() || again->size() != rollup->size()) {
    std::fprintf(stderr, "re-encoded rollup of %zu series: %s\n",
                 rollup->size(), again.status().ToString().c_str());
    __builtin_trap();
  }
  for (const auto& [id, s] : *rollup) {
    const auto it = again->find(id);
    if (it == again->end()) __builtin_trap();
    const auto& t = it->second;
    if (s.count != t.count || s.first_time_us != t.first_time_us ||
        s.last_time_us != t.last_time_us || !Same(s.sum, t.sum) ||
        !Same(s.min, t.min) || !Same(s.max, t.max) ||
        !Same(s.first_value, t.first_value) ||
        !Same(s.last_value, t.last_value)) {
      // Show what changed, then stop.
      std::fprintf(stderr,
                   "series %lld changed: count %lld/%lld, times %lld..%lld / "
                   "%lld..%lld, sum %a/%a, min %a/%a, max %a/%a, first %a/%a, "
                   "last %a/%a\n",
                   static_cast<long long>(id), static_cast<long long>(s.count),
                   static_cast<long long>(t.count),
                   static_cast<long long>(s.first_time_us),
                   static_cast<long long>(s.last_time_us),
                   static_cast<long long>(t.first_time_us),
                   static_cast<long long>(t.last_time_us), s.sum, t.sum, s.min,
                   t.min, s.max, t.max, s.first_value, t.first_value,
                   s.last_value, t.last_value);
      __builtin_trap();
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // The first byte picks the format; for rollups the next 8 are the
  // bucket's start.
  if (size < 1) return 0;
  const absl::string_view rest(reinterpret_cast<const char*>(data) + 1,
                               size - 1);
  if (data[0] % 2 == 0) {
    CheckReport(rest);
    return 0;
  }
  if (rest.size() < 8) return 0;
  int64_t start_us;
  std::memcpy(&start_us, rest.data(), 8);
  CheckRollup(rest.substr(8), start_us);
  return 0;
}
