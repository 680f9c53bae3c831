#include "common/memory_trimmer.h"

#include <malloc.h>

namespace metrics::common {

MemoryTrimmer::MemoryTrimmer(absl::Duration interval)
    : thread_([this, interval] {
        absl::MutexLock lock(&mu_);
        while (!mu_.AwaitWithTimeout(absl::Condition(&stopping_), interval)) {
          mu_.Unlock();
          malloc_trim(0);
          mu_.Lock();
        }
      }) {}

MemoryTrimmer::~MemoryTrimmer() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  thread_.join();
}

}  // namespace metrics::common
