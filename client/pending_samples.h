// The Reporter's buffer of samples not yet put into a batch: the series seen
// so far (name, GPU, unit) interned to small numbers, and a FIFO of compact
// (time, series, value) entries, 24 bytes each. TakeBatch turns the oldest
// entries into a SystemMetricsBatch that declares only the series it uses and
// groups the values of one instant into one report.
//
// Thread-compatible: the Reporter guards it with its mutex.
#ifndef METRICS_CLIENT_PENDING_SAMPLES_H_
#define METRICS_CLIENT_PENDING_SAMPLES_H_

#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "proto/metrics/v1/ingest.pb.h"

namespace metrics::client {

class PendingSamples {
 public:
  // The series number of (name, gpu_uuid, unit), adding it if new; nullopt
  // when it is new and `max_series` are known already.
  std::optional<uint32_t> Intern(absl::string_view name,
                                 absl::string_view gpu_uuid,
                                 absl::string_view unit, int max_series);

  // Appends one sample. `now` is when it was recorded, for batch age.
  void Push(absl::Time time, uint32_t series, double value, absl::Time now);

  // Drops the `n` oldest samples (at most size()).
  void DropOldest(int64_t n);

  // Removes up to `max_samples` of the oldest samples and returns them as a
  // batch for `agent_id` (trial and sequence left unset).
  v1::SystemMetricsBatch TakeBatch(int max_samples,
                                   const std::string& agent_id);

  int64_t size() const { return static_cast<int64_t>(entries_.size()); }
  // When the oldest sample was recorded; InfiniteFuture() when empty.
  absl::Time oldest_recorded() const;

 private:
  struct Series {
    std::string name;
    std::string gpu_uuid;
    std::string unit;
  };
  struct Entry {
    int64_t time_ns;
    uint32_t series;
    double value;
  };

  std::vector<Series> series_;
  absl::flat_hash_map<std::string, uint32_t> series_numbers_;
  std::string key_scratch_;  // reused so a known series costs no allocation
  std::deque<Entry> entries_;
  // Record time of entries, run-length coded: (count, time) pairs, oldest
  // first; a batch's age needs only the oldest.
  std::deque<std::pair<int64_t, absl::Time>> recorded_;
  // Batch-local index of each series while TakeBatch runs (-1: not used).
  std::vector<int32_t> local_index_;
};

}  // namespace metrics::client

#endif  // METRICS_CLIENT_PENDING_SAMPLES_H_
