// SeriesIdCache: every label tells entries apart, entries come back with
// their unit whatever the insertion order, and the bound clears the cache.
#include "storage/pg/ingest/series_id_cache.h"

#include <algorithm>
#include <random>
#include <string>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace metrics::storage::pg {
namespace {

TEST(SeriesIdCacheTest, EveryLabelTellsEntriesApart) {
  SeriesIdCache cache(100);
  cache.Insert({1, "system", "host-a", "GPU-1", "gpu_util"}, 10, "percent");
  cache.Insert({1, "system", "host-a", "", "cpu_util"}, 11, "percent");
  cache.Insert({1, "system", "host-a", "GPU-1", "gpu_free_memory"}, 12, "bytes");
  auto found = cache.Find({1, "system", "host-a", "GPU-1", "gpu_util"});
  ASSERT_TRUE(found.has_value());
  EXPECT_EQ(found->id, 10);
  EXPECT_EQ(found->unit, "percent");
  found = cache.Find({1, "system", "host-a", "GPU-1", "gpu_free_memory"});
  ASSERT_TRUE(found.has_value());
  EXPECT_EQ(found->id, 12);
  EXPECT_EQ(found->unit, "bytes");
  EXPECT_EQ(cache.Find({1, "system", "host-a", "", "cpu_util"})->id, 11);
  // One label different: not the same series.
  EXPECT_FALSE(cache.Find({2, "system", "host-a", "GPU-1", "gpu_util"}));
  EXPECT_FALSE(cache.Find({1, "timing", "host-a", "GPU-1", "gpu_util"}));
  EXPECT_FALSE(cache.Find({1, "system", "host-b", "GPU-1", "gpu_util"}));
  EXPECT_FALSE(cache.Find({1, "system", "host-a", "GPU-2", "gpu_util"}));
  EXPECT_FALSE(cache.Find({1, "system", "host-a", "", "gpu_util"}));
  EXPECT_FALSE(cache.Find({1, "system", "host-a", "GPU-1", "cpu_util"}));
  EXPECT_EQ(cache.size(), 3u);
  // Inserting again replaces, without counting twice.
  cache.Insert({1, "system", "host-a", "GPU-1", "gpu_util"}, 10, "percent");
  EXPECT_EQ(cache.size(), 3u);
}

TEST(SeriesIdCacheTest, ManyAgentsInAnyOrderComeBackExactly) {
  struct Item {
    std::string agent, gpu, name, unit;
    int64_t id;
  };
  std::vector<Item> items;
  int64_t id = 1;
  for (int a = 0; a < 50; ++a) {
    for (int g = 0; g <= 8; ++g) {
      for (const char* name : {"util", "free_memory", "temp"}) {
        items.push_back({absl::StrCat("agent-", a),
                         g == 0 ? "" : absl::StrCat("GPU-", 9 - g), name,
                         absl::StrCat("unit-", id % 3), id});
        ++id;
      }
    }
  }
  std::mt19937 random(7);
  std::shuffle(items.begin(), items.end(), random);
  SeriesIdCache cache(items.size());
  for (const Item& i : items) cache.Insert({3, "system", i.agent, i.gpu, i.name}, i.id, i.unit);
  EXPECT_EQ(cache.size(), items.size());
  for (const Item& i : items) {
    auto found = cache.Find({3, "system", i.agent, i.gpu, i.name});
    ASSERT_TRUE(found.has_value()) << i.agent << " " << i.gpu << " " << i.name;
    EXPECT_EQ(found->id, i.id);
    EXPECT_EQ(found->unit, i.unit);
  }
}

TEST(SeriesIdCacheTest, AFullCacheStartsAfresh) {
  SeriesIdCache cache(3);
  for (int i = 0; i < 3; ++i) {
    cache.Insert({1, "system", "a", "", absl::StrCat("s", i)}, i + 1, "u");
  }
  EXPECT_EQ(cache.size(), 3u);
  cache.Insert({1, "system", "b", "", "s"}, 9, "v");
  EXPECT_EQ(cache.size(), 1u);
  EXPECT_FALSE(cache.Find({1, "system", "a", "", "s0"}));
  EXPECT_EQ(cache.Find({1, "system", "b", "", "s"})->unit, "v");
}

TEST(SeriesIdCacheTest, LabelsTooLongToPackAreLookedUpEachTimeInstead) {
  SeriesIdCache cache(100);
  const std::string long_gpu(300, 'g');
  cache.Insert({1, "system", "a", long_gpu, "gpu_util"}, 1, "percent");
  cache.Insert({1, "system", "a", "GPU-1", "gpu_util"}, 2, "percent");
  EXPECT_FALSE(cache.Find({1, "system", "a", long_gpu, "gpu_util"}));
  EXPECT_EQ(cache.Find({1, "system", "a", "GPU-1", "gpu_util"})->id, 2);
  EXPECT_EQ(cache.size(), 1u);
}

TEST(SeriesIdCacheTest, MoreDistinctNamesThanItCanNumberStartAfresh) {
  SeriesIdCache cache(1'000'000);
  constexpr int kNames = 70'000;  // more than a 16-bit index counts
  for (int i = 0; i < kNames; ++i) {
    cache.Insert({1, "system", absl::StrCat("agent-", i), "",
                  absl::StrCat("name-", i)},
                 i + 1, "u");
  }
  EXPECT_LT(cache.size(), static_cast<size_t>(kNames));
  for (int i : {kNames - 1, kNames - 100}) {
    auto found = cache.Find({1, "system", absl::StrCat("agent-", i), "",
                             absl::StrCat("name-", i)});
    ASSERT_TRUE(found.has_value()) << i;
    EXPECT_EQ(found->id, i + 1);
    EXPECT_EQ(found->unit, "u");
  }
  EXPECT_FALSE(cache.Find({1, "system", "agent-0", "", "name-0"}));
}

}  // namespace
}  // namespace metrics::storage::pg
