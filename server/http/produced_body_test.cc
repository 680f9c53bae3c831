// ProducedBody: a pushing producer's chunks pulled in order, its end or
// failure told apart, a bounded queue, and a client that leaves stopping it.
#include "server/http/produced_body.h"

#include <atomic>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/status_macros.h"
#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace metrics::server {
namespace {

using ::metrics::test_util::StatusIs;

// Pulls until the end: the chunks joined, and the last step.
std::pair<std::string, StreamStep> PullAll(HttpResponse::Stream stream) {
  std::string all;
  for (;;) {
    std::string chunk;
    const StreamStep step = stream(chunk);
    all += chunk;
    if (step != StreamStep::kMore) return {all, step};
  }
}

TEST(ProducedBodyTest, ChunksArriveInOrderAndTheEndIsTold) {
  auto body = ProducedBody::Start([](const ProducedBody::Emit& emit) {
    for (int i = 0; i < 10; ++i) RETURN_IF_ERROR(emit(absl::StrCat(i, ";")));
    return absl::OkStatus();
  });
  ASSERT_OK(body->AwaitStart());
  const auto [all, step] = PullAll(ProducedBody::AsStream(std::move(body)));
  EXPECT_EQ(all, "0;1;2;3;4;5;6;7;8;9;");
  EXPECT_EQ(step, StreamStep::kEnd);
}

TEST(ProducedBodyTest, AFailureBeforeAnyChunkIsTheAnswersStatus) {
  auto body = ProducedBody::Start([](const ProducedBody::Emit&) {
    return absl::OutOfRangeError("raw samples have expired");
  });
  EXPECT_THAT(body->AwaitStart(), StatusIs(absl::StatusCode::kOutOfRange));
}

TEST(ProducedBodyTest, AFailureAfterChunksAbortsTheBody) {
  auto body = ProducedBody::Start([](const ProducedBody::Emit& emit) {
    RETURN_IF_ERROR(emit("a,"));
    RETURN_IF_ERROR(emit("b,"));
    return absl::UnavailableError("the database went away");
  });
  ASSERT_OK(body->AwaitStart());
  const auto [all, step] = PullAll(ProducedBody::AsStream(std::move(body)));
  EXPECT_EQ(all, "a,b,");
  EXPECT_EQ(step, StreamStep::kAbort);
}

TEST(ProducedBodyTest, TheQueueIsBoundedAndALeavingClientStopsTheProducer) {
  std::atomic<int> emitted{0};
  absl::Status last;
  {
    auto body = ProducedBody::Start(
        [&](const ProducedBody::Emit& emit) {
          for (int i = 0; i < 1000; ++i) {
            if (absl::Status s = emit(std::string(1024, 'x')); !s.ok()) {
              last = s;
              return s;
            }
            ++emitted;
          }
          return absl::OkStatus();
        },
        /*max_queued=*/3);
    ASSERT_OK(body->AwaitStart());
    absl::SleepFor(absl::Milliseconds(200));  // nobody pulls
    EXPECT_EQ(emitted.load(), 3);
  }  // the client left: the producer's next emit fails, and it is joined
  EXPECT_THAT(last, StatusIs(absl::StatusCode::kCancelled));
  EXPECT_EQ(emitted.load(), 3);
}

}  // namespace
}  // namespace metrics::server
