// Hands the memory malloc holds free back to the kernel every so often
// (glibc's malloc_trim). metricsd's memory follows its open streams: when
// thousands of agents leave, malloc keeps what they used, in pages spread
// through its heap that no later allocation may reuse, and RSS stays at the
// high-water mark. Trimming returns the wholly free pages; it walks the
// free lists, a few milliseconds for a heap of 150 MB.
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
