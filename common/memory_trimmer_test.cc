// The trimmer hands memory malloc holds free back to the kernel.

#include "common/memory_trimmer.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "absl/time/clock.h"
#include "common/testing/eventually.h"
#include "gtest/gtest.h"

namespace metrics::common {
namespace {

double RssMb() {
  long pages = 0;
  if (FILE* f = std::fopen("/proc/self/statm", "r")) {
    long size = 0;
    if (std::fscanf(f, "%ld %ld", &size, &pages) != 2) pages = 0;
    std::fclose(f);
  }
  return static_cast<double>(pages) * sysconf(_SC_PAGESIZE) / (1 << 20);
}

// GCC says so with these macros, clang with __has_feature.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define METRICS_OWN_ALLOCATOR 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define METRICS_OWN_ALLOCATOR 1
#endif
#endif

TEST(MemoryTrimmerTest, FreedHeapMemoryLeavesTheResidentSet) {
#ifdef METRICS_OWN_ALLOCATOR
  GTEST_SKIP() << "the sanitizers bring their own allocator";
#endif
  // 64 MB of blocks below malloc's mmap threshold, as many streams' buffers
  // would be; every 64th stays, so the freed ones lie between blocks in use
  // and free() alone gives none of them back.
  constexpr size_t kBlock = 16 * 1024, kBlocks = 4096;
  std::vector<char*> blocks;
  for (size_t i = 0; i < kBlocks; ++i) {
    blocks.push_back(static_cast<char*>(std::malloc(kBlock)));
    std::memset(blocks.back(), 1, kBlock);
  }
  const double used = RssMb();
  for (size_t i = 0; i < kBlocks; ++i) {
    if (i % 64 != 63) {
      std::free(blocks[i]);
      blocks[i] = nullptr;
    }
  }
  const double freed = RssMb();
  ASSERT_GT(freed, used - 16) << "malloc gave the freed blocks back itself";

  const MemoryTrimmer trimmer(absl::Milliseconds(50));
  test_util::Eventually([&] { return RssMb() <= freed - 48; },
                        absl::Seconds(5));
  EXPECT_LT(RssMb(), freed - 48);
  for (char* b : blocks) std::free(b);
}

}  // namespace
}  // namespace metrics::common
