// The follow cursor over hand-made answers: what it asks for next and what
// it yields of each answer (new buckets, changed buckets, raw points once,
// including several at one time).
#include "query/follow_cursor.h"

#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace metrics::query {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

const absl::Time kNow = absl::FromUnixSeconds(1763800000);

struct Point {
  int64_t time_us;
  double value;
};

// One series' raw answer: one entry per point.
SeriesData Raw(int64_t series_id, std::vector<Point> points) {
  SeriesData d;
  d.series.series_id = series_id;
  d.resolution_us = 0;
  for (const Point& p : points) {
    d.bucket_start_us.push_back(p.time_us);
    d.count.push_back(1);
    d.sum.push_back(p.value);
    d.min.push_back(p.value);
    d.max.push_back(p.value);
    d.mean.push_back(p.value);
    d.first_time_us.push_back(p.time_us);
    d.first_value.push_back(p.value);
    d.last_time_us.push_back(p.time_us);
    d.last_value.push_back(p.value);
  }
  return d;
}

struct Bucket {
  int64_t start_us;
  int64_t count;
  double max;
};

// One series' bucketed answer at `width_us`.
SeriesData Buckets(int64_t series_id, int64_t width_us,
                   std::vector<Bucket> buckets) {
  SeriesData d;
  d.series.series_id = series_id;
  d.resolution_us = width_us;
  for (const Bucket& b : buckets) {
    d.bucket_start_us.push_back(b.start_us);
    d.count.push_back(b.count);
    d.sum.push_back(b.max * static_cast<double>(b.count));
    d.min.push_back(0);
    d.max.push_back(b.max);
    d.mean.push_back(b.max);
    d.first_time_us.push_back(b.start_us);
    d.first_value.push_back(0);
    d.last_time_us.push_back(b.start_us + width_us - 1);
    d.last_value.push_back(b.max);
  }
  return d;
}

QueryResult Answer(std::vector<SeriesData> series) {
  QueryResult r;
  r.series = std::move(series);
  return r;
}

QueryRequest Request() {
  QueryRequest r;
  r.trial_id = 7;
  r.names = {"gpu_util"};
  return r;
}

std::vector<int64_t> Times(const QueryResult& r, size_t series) {
  return r.series[series].bucket_start_us;
}

TEST(FollowCursorTest, AnEmptyFirstAnswerIsReturnedWholeAndAskedAgain) {
  FollowCursor cursor(Request());
  QueryResult first = Answer({Raw(1, {}), Raw(2, {})});
  QueryResult out = cursor.Take(first);
  EXPECT_EQ(out.series.size(), 2u);  // every selected series, even empty
  EXPECT_FALSE(cursor.started());
  std::optional<QueryRequest> next = cursor.NextRequest(kNow);
  ASSERT_TRUE(next.has_value());
  EXPECT_FALSE(next->start.has_value());  // the whole query again
  EXPECT_FALSE(next->resolution_us.has_value());
}

TEST(FollowCursorTest, MixedResolutionsAreAskedAgainAtTheCoarsest) {
  FollowCursor cursor(Request());
  QueryResult mixed = Answer({Raw(1, {{10, 1}}), Buckets(2, 60, {{0, 5, 3}}),
                              Buckets(3, 30, {{0, 2, 3}})});
  std::optional<QueryRequest> again = cursor.AtOneResolution(mixed);
  ASSERT_TRUE(again.has_value());
  EXPECT_EQ(again->resolution_us, 60);
  EXPECT_EQ(again->names, Request().names);
  EXPECT_FALSE(
      cursor.AtOneResolution(Answer({Buckets(2, 60, {{0, 5, 3}}), Raw(1, {})}))
          .has_value());
}

TEST(FollowCursorTest, TheTailIsAskedAtTheFirstResolution) {
  QueryRequest request = Request();
  request.end = kNow + absl::Hours(1);
  FollowCursor cursor(request);
  cursor.Take(Answer({Buckets(1, 60, {{0, 5, 1}, {60, 5, 1}, {120, 2, 1}})}));
  ASSERT_TRUE(cursor.started());
  std::optional<QueryRequest> next = cursor.NextRequest(kNow);
  ASSERT_TRUE(next.has_value());
  EXPECT_EQ(next->resolution_us, 60);
  EXPECT_EQ(next->start, absl::FromUnixMicros(60));  // the last two buckets
  EXPECT_EQ(next->end, request.end);
}

TEST(FollowCursorTest, AnOpenWindowEndsADayAfterNow) {
  FollowCursor cursor(Request());
  cursor.Take(Answer({Raw(1, {{100, 1}})}));
  std::optional<QueryRequest> next = cursor.NextRequest(kNow);
  ASSERT_TRUE(next.has_value());
  EXPECT_EQ(next->start, absl::FromUnixMicros(100));
  EXPECT_EQ(next->end, kNow + absl::Hours(24));
  EXPECT_EQ(next->resolution_us, 0);
}

TEST(FollowCursorTest, NothingIsAskedOnceTheTailReachedTheEnd) {
  QueryRequest request = Request();
  request.start = absl::FromUnixMicros(0);
  request.end = absl::FromUnixMicros(200);
  FollowCursor cursor(request);
  cursor.Take(Answer({Raw(1, {{199, 1}})}));
  EXPECT_EQ(cursor.NextRequest(kNow)->start, absl::FromUnixMicros(199));
  FollowCursor past(request);
  past.Take(Answer({Raw(1, {{200, 1}})}));  // at the end: nothing after it
  EXPECT_FALSE(past.NextRequest(kNow).has_value());
}

TEST(FollowCursorTest, UnchangedBucketsYieldNothing) {
  FollowCursor cursor(Request());
  const SeriesData d = Buckets(1, 60, {{0, 5, 1}, {60, 5, 1}, {120, 2, 1}});
  cursor.Take(Answer({d}));
  QueryResult out =
      cursor.Take(Answer({Buckets(1, 60, {{60, 5, 1}, {120, 2, 1}})}));
  EXPECT_THAT(out.series, IsEmpty());
}

TEST(FollowCursorTest, AChangedOrNewBucketIsYielded) {
  FollowCursor cursor(Request());
  cursor.Take(Answer({Buckets(1, 60, {{0, 5, 1}, {60, 5, 1}, {120, 2, 1}})}));
  // A late report raised bucket 60's max; 120 grew; 180 is new.
  QueryResult out = cursor.Take(
      Answer({Buckets(1, 60, {{60, 5, 9}, {120, 3, 1}, {180, 1, 1}})}));
  ASSERT_EQ(out.series.size(), 1u);
  EXPECT_THAT(Times(out, 0), ElementsAre(60, 120, 180));
  EXPECT_THAT(out.series[0].max, ElementsAre(9, 1, 1));
  EXPECT_EQ(out.series[0].resolution_us, 60);
  // The tail moved on: 120 and 180.
  EXPECT_EQ(cursor.NextRequest(kNow)->start, absl::FromUnixMicros(120));
  EXPECT_THAT(
      cursor.Take(Answer({Buckets(1, 60, {{120, 3, 1}, {180, 1, 1}})})).series,
      IsEmpty());
}

TEST(FollowCursorTest, CursorsThatTookTheSameTailAreInTheSameState) {
  // One started from the whole window, the other from its last minute; both
  // then take the same tail.
  FollowCursor whole(Request());
  FollowCursor late(Request());
  EXPECT_FALSE(whole.SameStateAs(late));  // neither has started
  whole.Take(Answer({Buckets(1, 60, {{0, 5, 1}, {60, 5, 1}, {120, 2, 1}})}));
  late.Take(Answer({Buckets(1, 60, {{120, 1, 1}})}));
  EXPECT_FALSE(whole.SameStateAs(late));
  EXPECT_FALSE(late.SameStateAs(whole));
  const QueryResult tail =
      Answer({Buckets(1, 60, {{60, 5, 1}, {120, 3, 1}, {180, 1, 1}})});
  whole.Take(tail);
  late.Take(tail);
  ASSERT_TRUE(whole.SameStateAs(late));
  // Same state, same parts from here on.
  const QueryResult next = Answer({Buckets(1, 60, {{180, 4, 2}, {240, 1, 1}})});
  EXPECT_EQ(Times(whole.Take(next), 0), Times(late.Take(next), 0));
  // A cursor at another resolution is not in the same state.
  FollowCursor other(Request());
  other.Take(Answer({Buckets(1, 10, {{180, 4, 2}, {240, 1, 1}})}));
  EXPECT_FALSE(other.SameStateAs(whole));
}

TEST(FollowCursorTest, ASeriesBehindTheOthersDoesNotResendItsOldBuckets) {
  FollowCursor cursor(Request());
  // Series 2 stopped at bucket 60; series 1 goes on, so the tail read starts
  // at 0 and carries series 1's buckets before its own tail.
  cursor.Take(Answer({Buckets(1, 60, {{0, 1, 1}, {60, 1, 1}, {120, 1, 1}}),
                      Buckets(2, 60, {{0, 1, 1}, {60, 1, 1}})}));
  EXPECT_EQ(cursor.NextRequest(kNow)->start, absl::FromUnixMicros(0));
  QueryResult out = cursor.Take(
      Answer({Buckets(1, 60, {{0, 1, 1}, {60, 1, 1}, {120, 1, 1}, {180, 1, 1}}),
              Buckets(2, 60, {{0, 1, 1}, {60, 1, 1}})}));
  ASSERT_EQ(out.series.size(), 1u);
  EXPECT_EQ(out.series[0].series.series_id, 1);
  EXPECT_THAT(Times(out, 0), ElementsAre(180));
}

TEST(FollowCursorTest, RawPointsAreYieldedOnce) {
  FollowCursor cursor(Request());
  cursor.Take(Answer({Raw(1, {{10, 1}, {20, 2}})}));
  QueryResult out = cursor.Take(Answer({Raw(1, {{20, 2}, {30, 3}, {40, 4}})}));
  ASSERT_EQ(out.series.size(), 1u);
  EXPECT_THAT(Times(out, 0), ElementsAre(30, 40));
  EXPECT_THAT(out.series[0].last_value, ElementsAre(3, 4));
  EXPECT_THAT(cursor.Take(Answer({Raw(1, {{40, 4}})})).series, IsEmpty());
}

TEST(FollowCursorTest, RawPointsWithEqualTimesAreEachYieldedOnce) {
  FollowCursor cursor(Request());
  // Two points at 20 in the first answer; a third at 20 lands later (it
  // comes after them in ingest order), with a point at 30.
  cursor.Take(Answer({Raw(1, {{10, 1}, {20, 2}, {20, 3}})}));
  EXPECT_EQ(cursor.NextRequest(kNow)->start, absl::FromUnixMicros(20));
  QueryResult out =
      cursor.Take(Answer({Raw(1, {{20, 2}, {20, 3}, {20, 4}, {30, 5}})}));
  ASSERT_EQ(out.series.size(), 1u);
  EXPECT_THAT(Times(out, 0), ElementsAre(20, 30));
  EXPECT_THAT(out.series[0].last_value, ElementsAre(4, 5));
  // Two at 30 now (one new): only the new one.
  out = cursor.Take(Answer({Raw(1, {{30, 5}, {30, 6}})}));
  ASSERT_EQ(out.series.size(), 1u);
  EXPECT_THAT(Times(out, 0), ElementsAre(30));
  EXPECT_THAT(out.series[0].last_value, ElementsAre(6));
  EXPECT_THAT(cursor.Take(Answer({Raw(1, {{30, 5}, {30, 6}})})).series,
              IsEmpty());
}

TEST(FollowCursorTest, ASeriesThatAppearsLaterIsYieldedWhole) {
  FollowCursor cursor(Request());
  cursor.Take(Answer({Raw(1, {{10, 1}}), Raw(2, {})}));
  QueryResult out =
      cursor.Take(Answer({Raw(1, {{10, 1}}), Raw(2, {{10, 7}, {10, 8}})}));
  ASSERT_EQ(out.series.size(), 1u);
  EXPECT_EQ(out.series[0].series.series_id, 2);
  EXPECT_THAT(out.series[0].last_value, ElementsAre(7, 8));
}

}  // namespace
}  // namespace metrics::query
