// Hands the memory malloc holds free back to the kernel every so often
// (glibc's malloc_trim). metricsd's memory follows its open streams: when
// thousands of agents leave, malloc keeps what they used for later
// allocations, in free chunks spread through its heap, and RSS stays at the
// high-water mark until streams come back (126 MB after a step of 4000
// streams ended; 83 MB with the trimmer: docs/benchmarks.md, "Memory at
// thousands of streams"). Trimming returns the wholly free pages of those
// chunks.
//
// Thread-safety: thread-safe; the trimmer runs a thread of its own until
// destroyed.
#ifndef METRICS_COMMON_MEMORY_TRIMMER_H_
#define METRICS_COMMON_MEMORY_TRIMMER_H_

#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace metrics::common {

class MemoryTrimmer {
 public:
  explicit MemoryTrimmer(absl::Duration interval);
  ~MemoryTrimmer();  // stops the thread

  MemoryTrimmer(const MemoryTrimmer&) = delete;
  MemoryTrimmer& operator=(const MemoryTrimmer&) = delete;

 private:
  absl::Mutex mu_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;  // last: starts after the members above exist
};

}  // namespace metrics::common

#endif  // METRICS_COMMON_MEMORY_TRIMMER_H_
