#include "storage/format/rollup_codec.h"

#include <cstring>
#include <random>

#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace metrics::storage {
namespace {

using ::metrics::test_util::StatusIs;

constexpr int64_t kStart = 1763800000000000;  // a 10 s bucket's start

// Bitwise, so that -0.0 and 0.0 differ.
void ExpectSame(const AgentRollup& a, const AgentRollup& b) {
  ASSERT_EQ(a.size(), b.size());
  for (const auto& [id, s] : a) {
    ASSERT_EQ(b.count(id), 1u) << id;
    const RollupStats& t = b.at(id);
    EXPECT_EQ(s, t) << id;
    for (auto [x, y] : {std::pair(s.sum, t.sum), std::pair(s.min, t.min),
                        std::pair(s.max, t.max),
                        std::pair(s.first_value, t.first_value),
                        std::pair(s.last_value, t.last_value)}) {
      EXPECT_EQ(std::memcmp(&x, &y, sizeof x), 0) << id;
    }
  }
}

TEST(RollupCodecTest, RoundTripsAnyStatsAndAWantedSubset) {
  std::mt19937_64 random(11);
  std::uniform_real_distribution<double> any(-1e6, 1e6);
  for (int round = 0; round < 2000; ++round) {
    AgentRollup rollup;
    const int series = 1 + static_cast<int>(random() % 30);
    for (int s = 0; s < series; ++s) {
      const int64_t id = 1 + static_cast<int64_t>(random() % 100000);
      const int samples = 1 + static_cast<int>(random() % 12);
      for (int i = 0; i < samples; ++i) {
        // Times at whole seconds, milliseconds or microseconds, some before
        // the bucket's start (only a corrupt bucket has those, but they
        // must still round-trip).
        int64_t t = kStart + static_cast<int64_t>(random() % 10000000) -
                    (round % 17 == 0 ? 20000000 : 0);
        if (round % 3 == 0) t -= t % 1000000;
        if (round % 3 == 1) t -= t % 1000;
        const double v = round % 2 == 0 ? std::round(any(random)) / 100
                                        : any(random);
        rollup[id].Add(t, i % 5 == 4 ? -0.0 : v);
      }
    }
    const std::string bytes = EncodeAgentRollup(rollup, kStart);
    ASSERT_OK_AND_ASSIGN(AgentRollup back, DecodeAgentRollup(bytes, kStart));
    ExpectSame(rollup, back);
    // Ingest's sorted form is written and read the same.
    ASSERT_EQ(EncodeAgentRollup(SortedRollup(rollup.begin(), rollup.end()), kStart),
              bytes);
    ASSERT_OK_AND_ASSIGN(SortedRollup sorted, DecodeSortedRollup(bytes, kStart));
    ExpectSame(rollup, AgentRollup(sorted.begin(), sorted.end()));

    std::vector<int64_t> wanted;
    AgentRollup subset;
    for (const auto& [id, s] : rollup) {
      if (random() % 2 == 0) continue;
      wanted.push_back(id);
      subset[id] = s;
    }
    wanted.push_back(100001);  // absent: not in the answer
    ASSERT_OK_AND_ASSIGN(AgentRollup some,
                         DecodeAgentRollup(bytes, kStart, wanted));
    ExpectSame(subset, some);
  }
}

TEST(RollupCodecTest, A10SecondBucketOfAnAgentIsAboutAThirdOfFormat1) {
  AgentRollup rollup;
  std::mt19937_64 random(3);
  std::uniform_real_distribution<double> noise(-1, 1);
  for (int i = 0; i < 10; ++i) {
    const int64_t t = kStart + i * 1000000 + static_cast<int64_t>(random() % 1000);
    rollup[1].Add(t, 100.0 * (4000 + 300 * noise(random)) / 8000);  // a ratio
    rollup[2].Add(t, std::round(70 + 15 * noise(random)));           // GPU %
    rollup[3].Add(t, std::round(2e4 + noise(random) * 1e3) * 1048576);  // bytes
  }
  const std::string bytes = EncodeAgentRollup(rollup, kStart);
  // Format 1 takes 1 + 3 * 72 = 217.
  EXPECT_LE(bytes.size(), 100u) << bytes.size();
  ASSERT_OK_AND_ASSIGN(AgentRollup back, DecodeAgentRollup(bytes, kStart));
  ExpectSame(rollup, back);
}

TEST(RollupCodecTest, AnUnfoldedBucketIsMarkedAndReadAsAnyOther) {
  AgentRollup rollup;
  rollup[3].Add(kStart + 1000000, 1.5);
  rollup[3].Add(kStart + 2000000, -4);
  rollup[9].Add(kStart + 1000000, 7);
  const std::string folded = EncodeAgentRollup(rollup, kStart);
  const std::string unfolded =
      EncodeAgentRollup(rollup, kStart, Folding::kUnfolded);
  EXPECT_FALSE(IsUnfolded(folded));
  EXPECT_TRUE(IsUnfolded(unfolded));
  EXPECT_EQ(unfolded.substr(1), folded.substr(1));  // only the marker differs
  ASSERT_OK_AND_ASSIGN(AgentRollup back, DecodeAgentRollup(unfolded, kStart));
  ExpectSame(rollup, back);
  ASSERT_OK_AND_ASSIGN(SortedRollup sorted, DecodeSortedRollup(unfolded, kStart));
  ASSERT_EQ(sorted.size(), 2u);
  EXPECT_EQ(sorted[1].first, 9);
  EXPECT_FALSE(IsUnfolded(""));
}

TEST(RollupCodecTest, Format1IsStillRead) {
  // One series (id 7): count 2, sum 3, min 1, max 2, first (10, 1), last
  // (20, 2), as format 1 wrote it.
  std::string bytes(1, '\x01');
  const auto put = [&](auto v) {
    char b[8];
    std::memcpy(b, &v, 8);
    bytes.append(b, 8);
  };
  put(int64_t{7});
  put(int64_t{2});
  put(3.0);
  put(1.0);
  put(2.0);
  put(int64_t{10});
  put(1.0);
  put(int64_t{20});
  put(2.0);
  ASSERT_OK_AND_ASSIGN(AgentRollup back, DecodeAgentRollup(bytes, kStart));
  AgentRollup want;
  want[7].Add(10, 1);
  want[7].Add(20, 2);
  ExpectSame(want, back);
  ASSERT_OK_AND_ASSIGN(SortedRollup sorted, DecodeSortedRollup(bytes, kStart));
  ExpectSame(want, AgentRollup(sorted.begin(), sorted.end()));
  EXPECT_THAT(DecodeAgentRollup(bytes.substr(0, 50), kStart),
              StatusIs(absl::StatusCode::kDataLoss));
  EXPECT_THAT(DecodeSortedRollup(bytes.substr(0, 50), kStart),
              StatusIs(absl::StatusCode::kDataLoss));
  // Format 1 wrote ids ascending, each once: a series repeated, or one
  // before the previous, is not its output.
  const std::string entry = bytes.substr(1);
  std::string id9 = entry;
  const int64_t nine = 9;
  std::memcpy(&id9[0], &nine, 8);
  for (const std::string& bad : {bytes + entry, "\x01" + id9 + entry}) {
    EXPECT_THAT(DecodeAgentRollup(bad, kStart),
                StatusIs(absl::StatusCode::kDataLoss));
    EXPECT_THAT(DecodeSortedRollup(bad, kStart),
                StatusIs(absl::StatusCode::kDataLoss));
  }
  ASSERT_OK_AND_ASSIGN(AgentRollup two,
                       DecodeAgentRollup(bytes + id9, kStart));  // 7, then 9
  EXPECT_EQ(two.size(), 2u);
}

TEST(RollupCodecTest, GarbageIsDataLoss) {
  AgentRollup rollup;
  rollup[42].Add(kStart + 1, 3.25);
  rollup[42].Add(kStart + 2000000, 1.0 / 3);
  rollup[50].Add(kStart + 5, 1e300);
  const std::string bytes = EncodeAgentRollup(rollup, kStart);
  EXPECT_THAT(DecodeAgentRollup("", kStart),
              StatusIs(absl::StatusCode::kDataLoss));
  EXPECT_THAT(DecodeAgentRollup("x", kStart),
              StatusIs(absl::StatusCode::kDataLoss));
  for (size_t cut = 1; cut < bytes.size(); ++cut) {
    absl::StatusOr<AgentRollup> r =
        DecodeAgentRollup(bytes.substr(0, cut), kStart);
    // A cut after the version byte or the first series' entry is a valid
    // bucket of fewer series.
    if (r.ok()) {
      EXPECT_LT(r->size(), 2u) << cut;
      continue;
    }
    EXPECT_THAT(r, StatusIs(absl::StatusCode::kDataLoss,
                            testing::HasSubstr("packed format 2")))
        << cut;
    EXPECT_THAT(DecodeSortedRollup(bytes.substr(0, cut), kStart),
                StatusIs(absl::StatusCode::kDataLoss))
        << cut;
  }
}

}  // namespace
}  // namespace metrics::storage
