#include "storage/rollup.h"

#include <algorithm>

namespace metrics::storage {

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

SortedRollup MergeSortedRollups(const SortedRollup& earlier,
                                const SortedRollup& later) {
  SortedRollup merged;
  merged.reserve(std::max(earlier.size(), later.size()));
  auto a = earlier.begin(), b = later.begin();
  while (a != earlier.end() || b != later.end()) {
    if (b == later.end() || (a != earlier.end() && a->first < b->first)) {
      merged.push_back(*a++);
    } else if (a == earlier.end() || b->first < a->first) {
      merged.push_back(*b++);
    } else {
      merged.push_back(*a++);
      merged.back().second.Merge((b++)->second);
    }
  }
  return merged;
}

int64_t AlignDown(int64_t time_us, int64_t width_us) {
  int64_t start = time_us / width_us * width_us;
  if (start > time_us) start -= width_us;  // division truncates toward 0
  return start;
}

}  // namespace metrics::storage
