// DeclaredSeries: a batch repeats the declarations only with the same
// labels in the same order for the same trial, group and agent; what is
// packed comes back; published ids are read back whether consecutive or
// not, and the first publication stays.
#include "storage/declared_series.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace metrics::storage {
namespace {

std::vector<SeriesDeclaration> Host() {
  return {{"cpu_util_simple", "", "percent"},
          {"gpu_util", "GPU-5f3c1c4e-8f2b-1d2e-9a3b-4c5d6e7f8a90", "percent"},
          {"gpu_free_memory", "GPU-5f3c1c4e-8f2b-1d2e-9a3b-4c5d6e7f8a90", "bytes"}};
}

bool Repeats(const DeclaredSeries& declared, int32_t trial, absl::string_view agent,
             const std::vector<SeriesDeclaration>& series) {
  return declared.Repeats(trial, kSystemGroup, agent, series.size(), [&](size_t i) {
    return DeclaredSeries::Labels{series[i].name, series[i].gpu_uuid, series[i].unit};
  });
}

TEST(DeclaredSeriesTest, OnlyTheSameLabelsInOrderOfTheSameAgentRepeatThem) {
  const auto declared = DeclaredSeries::Create(7, kSystemGroup, "host-a", Host());
  EXPECT_TRUE(Repeats(*declared, 7, "host-a", Host()));
  EXPECT_FALSE(Repeats(*declared, 8, "host-a", Host()));
  EXPECT_FALSE(Repeats(*declared, 7, "host-b", Host()));
  EXPECT_FALSE(declared->Repeats(7, kTimingGroup, "host-a", 3, [](size_t) {
    return DeclaredSeries::Labels{"cpu_util_simple", "", "percent"};
  }));
  std::vector<SeriesDeclaration> other = Host();
  std::swap(other[1], other[2]);
  EXPECT_FALSE(Repeats(*declared, 7, "host-a", other));
  other = Host();
  other[2].unit = "MiB";
  EXPECT_FALSE(Repeats(*declared, 7, "host-a", other));
  other = Host();
  other.pop_back();
  EXPECT_FALSE(Repeats(*declared, 7, "host-a", other));
  other = Host();
  other.push_back(other.back());
  EXPECT_FALSE(Repeats(*declared, 7, "host-a", other));
}

TEST(DeclaredSeriesTest, UnpackGivesBackWhatWasDeclared) {
  const auto declared = DeclaredSeries::Create(7, kSystemGroup, "host-a", Host());
  const std::vector<SeriesDeclaration> back = declared->Unpack();
  ASSERT_EQ(back.size(), 3u);
  for (size_t i = 0; i < back.size(); ++i) {
    EXPECT_EQ(back[i].name, Host()[i].name);
    EXPECT_EQ(back[i].gpu_uuid, Host()[i].gpu_uuid);
    EXPECT_EQ(back[i].unit, Host()[i].unit);
  }
  EXPECT_FALSE(declared->kept_by_stream());
  EXPECT_TRUE(DeclaredSeries::Create(7, kSystemGroup, "host-a", Host(),
                                     DeclaredSeries::Keeper::kStream)
                  ->kept_by_stream());
}

TEST(DeclaredSeriesTest, PublishedIdsReadBackAndTheFirstPublicationStays) {
  const auto consecutive = DeclaredSeries::Create(7, kSystemGroup, "host-a", Host());
  EXPECT_FALSE(consecutive->ids_known());
  consecutive->PublishIds({41, 42, 43});
  ASSERT_TRUE(consecutive->ids_known());
  consecutive->PublishIds({1, 2, 3});
  EXPECT_EQ(consecutive->id(0), 41);
  EXPECT_EQ(consecutive->id(2), 43);

  const auto scattered = DeclaredSeries::Create(7, kSystemGroup, "host-a", Host());
  scattered->PublishIds({9, 4, 100});
  ASSERT_TRUE(scattered->ids_known());
  EXPECT_EQ(scattered->id(0), 9);
  EXPECT_EQ(scattered->id(1), 4);
  EXPECT_EQ(scattered->id(2), 100);

  // Ids of another count are no ids of these declarations.
  const auto wrong = DeclaredSeries::Create(7, kSystemGroup, "host-a", Host());
  wrong->PublishIds({1, 2});
  EXPECT_FALSE(wrong->ids_known());
}

}  // namespace
}  // namespace metrics::storage
