// The Reporter against the real server in-process (real PostgreSQL, real
// migrations): samples arrive once, permanent errors stop it without
// retrying, and the overflow policies drop or block and count it. The
// kill-and-restart run is in tests/integration/client_end_to_end_test.cc.
#include "client/reporter.h"

#include <cmath>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/testing/eventually.h"
#include "common/testing/json_file.h"
#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "storage/pg/pg_metric_store.h"
#include "storage/pg/pg_token_store.h"
#include "storage/pg/testing/pg_checks.h"
#include "tests/testing/test_server.h"
#include "tests/testing/trials.h"

namespace metrics::client {
namespace {

using ::metrics::test_util::StatusIs;
using ::metrics::test_util::TestServer;
using ::testing::HasSubstr;

// Nothing listens here: connections are refused at once.
constexpr char kUnreachable[] = "127.0.0.1:1";
const absl::Time kStart = absl::Now() - absl::Hours(1);

class ReporterTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    absl::StatusOr<std::unique_ptr<TestServer>> server = TestServer::Start();
    ASSERT_OK(server);
    server_ = server->release();
  }
  static void TearDownTestSuite() { delete server_; }

  void CreateTrial(int32_t id) {
    ASSERT_OK(test_util::CreateTrial(server_->Channel(), id));
  }
  void EndTrial(int32_t id) {
    ASSERT_OK(test_util::CompleteTrial(server_->Channel(), id));
  }

  static ReporterOptions Options(int32_t trial, std::string address = "") {
    ReporterOptions o;
    o.server_address = address.empty() ? server_->grpc_target() : address;
    o.trial_id = trial;
    o.agent_id = "host-1";
    o.initial_backoff = absl::Milliseconds(20);
    o.max_backoff = absl::Milliseconds(200);
    o.shutdown_timeout = absl::Milliseconds(200);
    return o;
  }

  static int64_t StoredValues(int32_t trial) {
    absl::StatusOr<int64_t> n = storage::pg::test_util::CountRawValues(
        server_->database_url(), trial);
    EXPECT_OK(n);
    return n.value_or(-1);
  }

  static TestServer* server_;
};

TestServer* ReporterTest::server_ = nullptr;

TEST_F(ReporterTest, EverySampleIsStoredOnceInSmallBatches) {
  CreateTrial(1);
  ReporterOptions options = Options(1);
  options.max_batch_samples = 100;
  ASSERT_OK_AND_ASSIGN(auto reporter, Reporter::Create(options));
  for (int i = 0; i < 1000; ++i) {
    ASSERT_OK(reporter->Record(
        kStart + absl::Milliseconds(i),
        {{"cpu_util_simple", i % 100 * 1.0, "percent"},
         {"gpu_util", 50, "percent", "GPU-0"},
         {"gpu_util", 60, "percent", "GPU-1"}}));
  }
  ASSERT_OK(reporter->Flush(absl::Now() + absl::Seconds(30)));
  const ReporterStats s = reporter->stats();
  EXPECT_EQ(s.recorded, 3000);
  EXPECT_EQ(s.sent, 3000);
  EXPECT_EQ(s.acknowledged, 3000);
  EXPECT_EQ(s.buffered, 0);
  EXPECT_EQ(s.retried, 0);
  EXPECT_EQ(StoredValues(1), 3000);
  EXPECT_OK(reporter->Shutdown(absl::Now() + absl::Seconds(5)));
  EXPECT_EQ(reporter->stats().unsent, 0);
}

TEST_F(ReporterTest, BatchesGoOutByAgeWithoutFlush) {
  CreateTrial(2);
  ReporterOptions options = Options(2);
  options.max_batch_age = absl::Milliseconds(50);
  ASSERT_OK_AND_ASSIGN(auto reporter, Reporter::Create(options));
  ASSERT_OK(reporter->Record(kStart, {{"memory_free", 1e9, "bytes"}}));
  // Far below max_batch_samples: only the age sends it.
  test_util::Eventually([&] { return reporter->stats().acknowledged > 0; },
                        absl::Seconds(30));
  EXPECT_EQ(reporter->stats().acknowledged, 1);
}

TEST_F(ReporterTest, UnknownTrialIsPermanentAndNotRetried) {
  ASSERT_OK_AND_ASSIGN(auto reporter, Reporter::Create(Options(999)));
  ASSERT_OK(reporter->Record(kStart, {{"memory_free", 1, "bytes"}}));
  EXPECT_THAT(reporter->Flush(absl::Now() + absl::Seconds(30)),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("999")));
  EXPECT_EQ(reporter->stats().connections, 1);
  EXPECT_THAT(reporter->Record(kStart, {{"memory_free", 1, "bytes"}}),
              StatusIs(absl::StatusCode::kNotFound));
  EXPECT_THAT(reporter->Shutdown(absl::Now() + absl::Seconds(5)),
              StatusIs(absl::StatusCode::kNotFound,
                       HasSubstr("1 samples could not be sent")));
  EXPECT_EQ(reporter->stats().unsent, 1);
}

TEST_F(ReporterTest, RefusedBatchIsCountedAndNotRetried) {
  CreateTrial(3);
  std::vector<std::string> events;
  ReporterOptions options = Options(3);
  options.on_event = [&events](absl::string_view e) {
    events.emplace_back(e);
  };
  ASSERT_OK_AND_ASSIGN(auto reporter, Reporter::Create(options));
  ASSERT_OK(reporter->Record(kStart, {{"temp", 40, "celsius"}}));
  ASSERT_OK(reporter->Flush(absl::Now() + absl::Seconds(30)));
  // A series keeps its unit: the server refuses the whole batch.
  ASSERT_OK(reporter->Record(kStart + absl::Seconds(1),
                             {{"temp", 104, "fahrenheit"}, {"fan", 1, "rpm"}}));
  ASSERT_OK(reporter->Flush(absl::Now() + absl::Seconds(30)));
  ASSERT_OK(reporter->Record(kStart + absl::Seconds(2), {{"temp", 41, "celsius"}}));
  ASSERT_OK(reporter->Shutdown(absl::Now() + absl::Seconds(30)));
  const ReporterStats s = reporter->stats();
  EXPECT_EQ(s.acknowledged, 2);
  EXPECT_EQ(s.rejected, 2);
  EXPECT_EQ(s.retried, 0);
  EXPECT_EQ(s.connections, 1);
  EXPECT_EQ(StoredValues(3), 2);
  ASSERT_FALSE(events.empty());
  EXPECT_THAT(events.front(), HasSubstr("refused batch 2"));
  EXPECT_THAT(events.front(), HasSubstr("unit"));
}

TEST_F(ReporterTest, EndedTrialStopsTheReporter) {
  CreateTrial(4);
  ASSERT_OK_AND_ASSIGN(auto reporter, Reporter::Create(Options(4)));
  ASSERT_OK(reporter->Record(kStart, {{"memory_free", 1, "bytes"}}));
  ASSERT_OK(reporter->Flush(absl::Now() + absl::Seconds(30)));
  EndTrial(4);
  ASSERT_OK(reporter->Record(kStart + absl::Seconds(1), {{"memory_free", 2, "bytes"}}));
  EXPECT_THAT(reporter->Flush(absl::Now() + absl::Seconds(30)),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("COMPLETED")));
  EXPECT_THAT(reporter->Record(kStart, {{"memory_free", 3, "bytes"}}),
              StatusIs(absl::StatusCode::kFailedPrecondition));
  EXPECT_EQ(reporter->stats().rejected, 1);
  EXPECT_EQ(StoredValues(4), 1);
}

TEST_F(ReporterTest, AStreamIdInUseElsewhereStopsTheNewcomer) {
  CreateTrial(8);
  ReporterOptions options = Options(8);
  options.stream_id = "shared-stream";
  ASSERT_OK_AND_ASSIGN(auto first, Reporter::Create(options));
  ASSERT_OK(first->Record(kStart, {{"memory_free", 1, "bytes"}}));
  ASSERT_OK(first->Flush(absl::Now() + absl::Seconds(30)));
  ASSERT_OK(first->Shutdown(absl::Now() + absl::Seconds(5)));
  // The server has batch 1 of the stream; a new reporter's batch 1 would be
  // skipped as a duplicate and lost, so it refuses to go on.
  ASSERT_OK_AND_ASSIGN(auto second, Reporter::Create(options));
  ASSERT_OK(second->Record(kStart + absl::Seconds(1), {{"memory_free", 2, "bytes"}}));
  EXPECT_THAT(second->Flush(absl::Now() + absl::Seconds(30)),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("another client uses the stream id")));
  EXPECT_EQ(StoredValues(8), 1);
}

TEST_F(ReporterTest, AResumingReporterContinuesTheStreamAnotherLeft) {
  CreateTrial(10);
  ReporterOptions options = Options(10);
  options.stream_id = "handed-over-stream";
  ASSERT_OK_AND_ASSIGN(auto first, Reporter::Create(options));
  ASSERT_OK(first->Record(kStart, {{"memory_free", 1, "bytes"}}));
  ASSERT_OK(first->Shutdown(absl::Now() + absl::Seconds(30)));
  options.resume_stream = true;
  ASSERT_OK_AND_ASSIGN(auto second, Reporter::Create(options));
  ASSERT_OK(second->Record(kStart + absl::Seconds(1), {{"memory_free", 2, "bytes"}}));
  ASSERT_OK(second->Record(kStart + absl::Seconds(2), {{"memory_free", 3, "bytes"}}));
  ASSERT_OK(second->Flush(absl::Now() + absl::Seconds(30)));
  EXPECT_EQ(second->stats().acknowledged, 2);
  EXPECT_EQ(StoredValues(10), 3);
}

TEST_F(ReporterTest, AServerRestoredFromABackupIsFollowedFromItsPosition) {
  CreateTrial(11);
  // Two servers on the database; the reporter uses the first while it
  // lives, then the second.
  ASSERT_OK_AND_ASSIGN(auto first, server_->StartReplica());
  ASSERT_OK_AND_ASSIGN(auto second, server_->StartReplica());
  ReporterOptions options = Options(
      11, absl::StrCat("ipv4:", first->grpc_target(), ",", second->grpc_target()));
  options.stream_id = "restored-stream";
  options.max_batch_samples = 1;  // a batch a sample
  absl::Mutex mu;
  std::vector<std::string> events;
  options.on_event = [&](absl::string_view e) {
    absl::MutexLock lock(&mu);
    events.emplace_back(e);
  };
  ASSERT_OK_AND_ASSIGN(auto reporter, Reporter::Create(options));
  for (int i = 0; i < 3; ++i) {
    ASSERT_OK(reporter->Record(kStart + absl::Seconds(i), {{"memory_free", 1.0 * i, "bytes"}}));
  }
  ASSERT_OK(reporter->Flush(absl::Now() + absl::Seconds(30)));
  ASSERT_EQ(StoredValues(11), 3);

  // The database goes back to when it had batch 1 of the stream, as a
  // restore from a backup takes it, and the server the reporter used goes.
  absl::StatusOr<std::string> gone = storage::pg::test_util::QueryScalar(
      server_->database_url(),
      "WITH gone AS (DELETE FROM metrics WHERE trial_id = 11 AND end_time > "
      "(SELECT min(end_time) FROM metrics WHERE trial_id = 11) RETURNING 1) "
      "SELECT count(*) FROM gone");
  ASSERT_OK(gone);
  EXPECT_EQ(*gone, "2");
  absl::StatusOr<std::string> back = storage::pg::test_util::QueryScalar(
      server_->database_url(),
      "WITH back AS (UPDATE ingest_positions SET last_sequence = 1 "
      "WHERE trial_id = 11 RETURNING 1) SELECT count(*) FROM back");
  ASSERT_OK(back);
  EXPECT_EQ(*back, "1");
  first.reset();

  ASSERT_OK(reporter->Record(kStart + absl::Seconds(3), {{"memory_free", 3, "bytes"}}));
  ASSERT_OK(reporter->Flush(absl::Now() + absl::Seconds(30)));
  EXPECT_EQ(StoredValues(11), 2);  // batch 1 and the new one; 2 and 3 were lost
  EXPECT_EQ(reporter->stats().acknowledged, 4);
  absl::MutexLock lock(&mu);
  EXPECT_THAT(events, testing::Contains(HasSubstr(
                          "the server has batches up to 1 only, though it had acknowledged "
                          "up to 3")));
}

TEST_F(ReporterTest, NewSeriesPastTheCapAreRefused) {
  ReporterOptions options = Options(9, kUnreachable);
  options.max_series = 2;
  ASSERT_OK_AND_ASSIGN(auto reporter, Reporter::Create(options));
  ASSERT_OK(reporter->Record(kStart, {{"a", 1, "u"}, {"b", 1, "u"}}));
  EXPECT_THAT(reporter->Record(kStart, {{"a", 2, "u"}, {"c", 1, "u"}}),
              StatusIs(absl::StatusCode::kResourceExhausted,
                       HasSubstr("series \"c\"")));
  EXPECT_OK(reporter->Record(kStart, {{"b", 2, "u"}}));  // known ones go on
  EXPECT_EQ(reporter->stats().recorded, 3);
}

TEST_F(ReporterTest, BadValuesAreRefusedWholeAtRecord) {
  ASSERT_OK_AND_ASSIGN(auto reporter, Reporter::Create(Options(5, kUnreachable)));
  EXPECT_THAT(reporter->Record(kStart, {{"a", 1, "u"}, {"b", std::nan(""), "u"}}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("values[1].value")));
  EXPECT_THAT(reporter->Record(kStart, {{"", 1, "u"}}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("values[0].name")));
  EXPECT_EQ(reporter->stats().recorded, 0);
}

// The shared label cases (client/testdata/labels.json) as a value's name,
// GPU UUID or unit: refused at Record naming the field and the server's
// reason, as the Python client refuses them, or recorded.
TEST_F(ReporterTest, EverySharedLabelCaseIsRefusedOrTakenAtRecord) {
  ASSERT_OK_AND_ASSIGN(auto reporter, Reporter::Create(Options(5, kUnreachable)));
  const boost::json::value table = test_util::ReadJsonFile(TESTDATA_DIR "/labels.json");
  ASSERT_FALSE(table.is_null());
  int64_t taken = 0;
  int n = 0;
  for (const boost::json::value& c : table.at("cases").as_array()) {
    if (c.as_object().contains("allow_empty")) continue;
    const std::string value(c.at("value").as_string());
    SCOPED_TRACE("\"" + value + "\"");
    const bool unit = c.at("max").as_int64() == 32;
    const std::string unit_series = absl::StrCat("unit_case_", ++n);  // a series' unit is fixed
    std::vector<Measurement> values;
    if (unit) {
      values = {{unit_series, 1, value}};
    } else if (value.empty()) {
      values = {{value, 1, "u"}};  // an empty GPU UUID is an agent-wide value
    } else {
      values = {{value, 1, "u"}, {"ok", 1, "u", value}};
    }
    for (size_t i = 0; i < values.size(); ++i) {
      const absl::Status status = reporter->Record(kStart, {values[i]});
      if (c.as_object().contains("problem")) {
        EXPECT_THAT(status, StatusIs(absl::StatusCode::kInvalidArgument,
                                     HasSubstr(absl::StrCat(
                                         unit ? "values[0].unit: "
                                              : i == 0 ? "values[0].name: " : "values[0].gpu_uuid: ",
                                         std::string(c.at("problem").as_string())))));
      } else {
        EXPECT_OK(status);
        ++taken;
      }
    }
  }
  EXPECT_EQ(reporter->stats().recorded, taken);
}

TEST_F(ReporterTest, OptionsAreChecked) {
  ReporterOptions o = Options(1);
  o.server_address.clear();
  EXPECT_THAT(Reporter::Create(o), StatusIs(absl::StatusCode::kInvalidArgument,
                                            HasSubstr("server_address")));
  o = Options(0);
  EXPECT_THAT(Reporter::Create(o), StatusIs(absl::StatusCode::kInvalidArgument,
                                            HasSubstr("trial_id")));
  o = Options(1);
  o.agent_id = "node 1 ";
  EXPECT_THAT(Reporter::Create(o),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("agent_id: must not start or end with a space")));
  o = Options(1);
  o.buffer_samples = 10;
  o.max_batch_samples = 20;
  EXPECT_THAT(Reporter::Create(o), StatusIs(absl::StatusCode::kInvalidArgument,
                                            HasSubstr("buffer_samples")));
}

TEST_F(ReporterTest, DropOldestKeepsTheNewestAndCountsDrops) {
  ReporterOptions options = Options(6, kUnreachable);
  options.buffer_samples = 100;
  options.max_batch_samples = 10;
  options.overflow = OverflowPolicy::kDropOldest;
  ASSERT_OK_AND_ASSIGN(auto reporter, Reporter::Create(options));
  for (int i = 0; i < 250; ++i) {
    ASSERT_OK(reporter->Record(kStart + absl::Seconds(i),
                               {{"memory_free", double(i), "bytes"}}));
  }
  ReporterStats s = reporter->stats();
  EXPECT_EQ(s.recorded, 250);
  EXPECT_EQ(s.dropped, 150);
  EXPECT_EQ(s.buffered, 100);
  EXPECT_THAT(reporter->Flush(absl::Now() + absl::Milliseconds(100)),
              StatusIs(absl::StatusCode::kDeadlineExceeded,
                       HasSubstr("100 samples not acknowledged")));
  EXPECT_THAT(reporter->Shutdown(absl::Now() + absl::Milliseconds(100)),
              StatusIs(absl::StatusCode::kDeadlineExceeded,
                       HasSubstr("100 samples could not be sent")));
  s = reporter->stats();
  EXPECT_EQ(s.unsent, 100);
  EXPECT_EQ(s.recorded, s.acknowledged + s.rejected + s.dropped + s.unsent);
  EXPECT_THAT(reporter->Record(kStart, {{"memory_free", 1, "bytes"}}),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("shut down")));
}

TEST_F(ReporterTest, BlockWaitsForRoomThenGivesUpAndCounts) {
  ReporterOptions options = Options(7, kUnreachable);
  options.buffer_samples = 100;
  options.max_batch_samples = 10;
  options.overflow = OverflowPolicy::kBlock;
  options.block_timeout = absl::Milliseconds(200);
  ASSERT_OK_AND_ASSIGN(auto reporter, Reporter::Create(options));
  for (int i = 0; i < 100; ++i) {
    ASSERT_OK(reporter->Record(kStart + absl::Seconds(i),
                               {{"memory_free", double(i), "bytes"}}));
  }
  EXPECT_THAT(reporter->Record(kStart, {{"memory_free", 1, "bytes"}, {"x", 1, "u"}}),
              StatusIs(absl::StatusCode::kResourceExhausted,
                       HasSubstr("buffer full")));
  const ReporterStats s = reporter->stats();
  EXPECT_EQ(s.recorded, 100);
  EXPECT_EQ(s.dropped, 2);
  EXPECT_EQ(s.buffered, 100);
}

// Against a server with --auth=required: the Reporter sends its token on
// every stream; a missing or wrong one is a permanent failure, not retried.
class ReporterAuthTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    server::ServerOptions options;
    options.auth_required = true;
    absl::StatusOr<std::unique_ptr<TestServer>> server =
        TestServer::Start(options);
    ASSERT_OK(server);
    server_ = server->release();
    storage::pg::PgMetricStoreOptions store;
    store.database_url = server_->database_url();
    ASSERT_OK(storage::pg::PgMetricStore::Create(store)->CreateTrial(
        21, absl::Now() + absl::Seconds(30)));
  }
  static void TearDownTestSuite() { delete server_; }

  static std::string Token(std::optional<int32_t> trial) {
    storage::pg::PgTokenStore tokens(server_->database_url());
    storage::TokenRequest request;
    request.role = trial ? storage::TokenRole::kReporter
                         : storage::TokenRole::kViewer;
    request.trial_id = trial;
    absl::StatusOr<storage::CreatedToken> created =
        tokens.Create(request, absl::Now() + absl::Seconds(30));
    EXPECT_OK(created);
    return created.ok() ? created->secret : "";
  }

  static ReporterOptions Options(std::string token) {
    ReporterOptions o;
    o.server_address = server_->grpc_target();
    o.trial_id = 21;
    o.agent_id = "host-1";
    o.token = std::move(token);
    o.initial_backoff = absl::Milliseconds(20);
    o.shutdown_timeout = absl::Milliseconds(200);
    return o;
  }

  static TestServer* server_;
};

TestServer* ReporterAuthTest::server_ = nullptr;

TEST_F(ReporterAuthTest, ATokenOfTheTrialIsAcknowledged) {
  ASSERT_OK_AND_ASSIGN(auto reporter, Reporter::Create(Options(Token(21))));
  ASSERT_OK(reporter->Record(kStart, {{"memory_free", 1, "bytes"}}));
  ASSERT_OK(reporter->Flush(absl::Now() + absl::Seconds(30)));
  EXPECT_EQ(reporter->stats().acknowledged, 1);
  ASSERT_OK(reporter->Shutdown(absl::Now() + absl::Seconds(5)));
}

TEST_F(ReporterAuthTest, NoTokenOrAWrongOneIsPermanent) {
  struct Case {
    std::string token;
    absl::StatusCode code;
  };
  for (const Case& c :
       {Case{"", absl::StatusCode::kUnauthenticated},
        Case{"mtk_" + std::string(64, '0'), absl::StatusCode::kUnauthenticated},
        Case{Token(std::nullopt), absl::StatusCode::kPermissionDenied}}) {
    ASSERT_OK_AND_ASSIGN(auto reporter, Reporter::Create(Options(c.token)));
    ASSERT_OK(reporter->Record(kStart, {{"memory_free", 1, "bytes"}}));
    absl::Status flushed = reporter->Flush(absl::Now() + absl::Seconds(30));
    EXPECT_EQ(flushed.code(), c.code) << flushed;
    if (!c.token.empty()) {
      EXPECT_THAT(flushed.message(), ::testing::Not(HasSubstr(c.token)));
    }
    EXPECT_EQ(reporter->stats().connections, 1);  // not retried
    reporter->Shutdown(absl::Now() + absl::Seconds(5)).IgnoreError();  // failed
  }
}

TEST_F(ReporterAuthTest, AMalformedTokenIsRefusedWithoutQuotingIt) {
  absl::StatusOr<std::unique_ptr<Reporter>> reporter =
      Reporter::Create(Options("mtk_abc def\n"));
  EXPECT_THAT(reporter, StatusIs(absl::StatusCode::kInvalidArgument,
                                 HasSubstr("token: must be printable ASCII")));
  EXPECT_THAT(reporter.status().message(), ::testing::Not(HasSubstr("abc")));
}

}  // namespace
}  // namespace metrics::client
