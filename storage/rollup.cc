#include "storage/rollup.h"

#include <cstring>

#include "absl/strings/str_cat.h"

namespace metrics::storage {

namespace {

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "the packed rollup format is little-endian");

constexpr char kVersion = 1;
constexpr size_t kEntryBytes = 9 * 8;

template <typename T>
void Put(std::string& out, T value) {
  char bytes[sizeof(T)];
  std::memcpy(bytes, &value, sizeof(T));
  out.append(bytes, sizeof(T));
}

template <typename T>
T Get(const char*& in) {
  T value;
  std::memcpy(&value, in, sizeof(T));
  in += sizeof(T);
  return value;
}

// Reads an entry's stats (after its series id), advancing `in`.
void ReadStats(const char*& in, RollupStats& s) {
  s.count = Get<int64_t>(in);
  s.sum = Get<double>(in);
  s.min = Get<double>(in);
  s.max = Get<double>(in);
  s.first_time_us = Get<int64_t>(in);
  s.first_value = Get<double>(in);
  s.last_time_us = Get<int64_t>(in);
  s.last_value = Get<double>(in);
}

}  // namespace

void RollupStats::Add(int64_t time_us, double value) {
  if (count == 0) {
    count = 1;
    sum = min = max = first_value = last_value = value;
    first_time_us = last_time_us = time_us;
    return;
  }
  ++count;
  sum += value;
  if (value < min) min = value;
  if (value > max) max = value;
  if (time_us < first_time_us) {
    first_time_us = time_us;
    first_value = value;
  }
  if (time_us >= last_time_us) {
    last_time_us = time_us;
    last_value = value;
  }
}

void RollupStats::Merge(const RollupStats& later) {
  if (later.count == 0) return;
  if (count == 0) {
    *this = later;
    return;
  }
  count += later.count;
  sum += later.sum;
  if (later.min < min) min = later.min;
  if (later.max > max) max = later.max;
  if (later.first_time_us < first_time_us) {
    first_time_us = later.first_time_us;
    first_value = later.first_value;
  }
  if (later.last_time_us >= last_time_us) {
    last_time_us = later.last_time_us;
    last_value = later.last_value;
  }
}

bool RollupStats::operator==(const RollupStats& o) const {
  return count == o.count && sum == o.sum && min == o.min && max == o.max &&
         first_time_us == o.first_time_us && first_value == o.first_value &&
         last_time_us == o.last_time_us && last_value == o.last_value;
}

void MergeAgentRollup(AgentRollup& into, const AgentRollup& later) {
  for (const auto& [series_id, stats] : later) into[series_id].Merge(stats);
}

int64_t AlignDown(int64_t time_us, int64_t width_us) {
  int64_t start = time_us / width_us * width_us;
  if (start > time_us) start -= width_us;  // division truncates toward 0
  return start;
}

std::string EncodeAgentRollup(const AgentRollup& rollup) {
  std::string out;
  out.reserve(1 + rollup.size() * kEntryBytes);
  out.push_back(kVersion);
  for (const auto& [series_id, s] : rollup) {
    Put(out, series_id);
    Put(out, s.count);
    Put(out, s.sum);
    Put(out, s.min);
    Put(out, s.max);
    Put(out, s.first_time_us);
    Put(out, s.first_value);
    Put(out, s.last_time_us);
    Put(out, s.last_value);
  }
  return out;
}

absl::StatusOr<AgentRollup> DecodeAgentRollup(
    absl::string_view bytes, const std::vector<int64_t>& wanted) {
  if (bytes.empty() || bytes[0] != kVersion ||
      (bytes.size() - 1) % kEntryBytes != 0) {
    return absl::DataLossError(absl::StrCat(
        "rollup row of ", bytes.size(), " bytes is not in packed format 1"));
  }
  AgentRollup rollup;
  const size_t entries = (bytes.size() - 1) / kEntryBytes;
  const char* base = bytes.data() + 1;
  for (int64_t id : wanted) {
    // Entries are sorted by series id: binary search.
    size_t lo = 0, hi = entries;
    while (lo < hi) {
      const size_t mid = (lo + hi) / 2;
      const char* at = base + mid * kEntryBytes;
      if (Get<int64_t>(at) < id) {
        lo = mid + 1;
      } else {
        hi = mid;
      }
    }
    if (lo == entries) continue;
    const char* in = base + lo * kEntryBytes;
    if (Get<int64_t>(in) != id) continue;
    ReadStats(in, rollup[id]);
  }
  return rollup;
}

absl::StatusOr<AgentRollup> DecodeAgentRollup(absl::string_view bytes) {
  if (bytes.empty() || bytes[0] != kVersion ||
      (bytes.size() - 1) % kEntryBytes != 0) {
    return absl::DataLossError(absl::StrCat(
        "rollup row of ", bytes.size(), " bytes is not in packed format 1"));
  }
  AgentRollup rollup;
  const char* in = bytes.data() + 1;
  const char* end = bytes.data() + bytes.size();
  while (in < end) {
    const int64_t series_id = Get<int64_t>(in);
    ReadStats(in, rollup[series_id]);
  }
  return rollup;
}

}  // namespace metrics::storage
