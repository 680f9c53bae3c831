// A full disk, for real (docs/operating.md, "Full disk"): the test
// database's raw partition and rollups go to a tablespace on a 1 MB tmpfs,
// and an agent streams more than fits. PostgreSQL then fails with "could not
// extend file ...: No space left on device"; metricsd acknowledges nothing
// it did not commit (its retries outlast, the batches fail and come again),
// says so in /healthz and /metrics, and when the tmpfs grows, goes on by
// itself and says so: the agent's every sample is stored once.
// Mounting needs root (as CI runs); elsewhere the test is skipped and says
// why.
#include <pwd.h>
#include <stdlib.h>
#include <sys/mount.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/testing/eventually.h"
#include "common/testing/status_matchers.h"
#include "gtest/gtest.h"
#include "storage/pg/testing/pg_checks.h"
#include "tests/testing/http_client.h"
#include "tests/testing/realistic_batch.h"
#include "tests/testing/resending_streamer.h"
#include "tests/testing/test_server.h"
#include "tests/testing/trials.h"

namespace metrics::test_util {
namespace {

namespace pgtest = ::metrics::storage::pg::test_util;

constexpr int kDiskBatches = 400;
constexpr int kDiskReportsPerBatch = 10;
const absl::Time kDiskStart = absl::FromUnixSeconds(1'790'000'000);

// A tmpfs of `size` mounted on a new folder the PostgreSQL server's user
// owns; unmounted and removed when done.
class SmallDisk {
 public:
  // Empty with `why` set when it cannot be made here.
  static std::unique_ptr<SmallDisk> Mount(const char* size, std::string& why) {
    if (::geteuid() != 0) {
      why = "mounting a tmpfs needs root";
      return nullptr;
    }
    const passwd* postgres = ::getpwnam("postgres");
    if (postgres == nullptr) {
      why = "no \"postgres\" user to give the tablespace to";
      return nullptr;
    }
    std::string dir = "/tmp/metrics-full-disk-XXXXXX";
    if (::mkdtemp(dir.data()) == nullptr) {
      why = "mkdtemp failed";
      return nullptr;
    }
    if (::mount("tmpfs", dir.c_str(), "tmpfs", 0, absl::StrCat("size=", size).c_str()) != 0) {
      why = absl::StrCat("cannot mount a tmpfs here: ", std::strerror(errno));
      ::rmdir(dir.c_str());
      return nullptr;
    }
    if (::chown(dir.c_str(), postgres->pw_uid, postgres->pw_gid) != 0) {
      why = "chown failed";
      ::umount2(dir.c_str(), MNT_DETACH);
      ::rmdir(dir.c_str());
      return nullptr;
    }
    return std::unique_ptr<SmallDisk>(new SmallDisk(std::move(dir)));
  }
  ~SmallDisk() {
    ::umount2(dir_.c_str(), MNT_DETACH);
    ::rmdir(dir_.c_str());
  }
  bool Grow(const char* size) const {
    return ::mount("tmpfs", dir_.c_str(), "tmpfs", MS_REMOUNT,
                   absl::StrCat("size=", size).c_str()) == 0;
  }
  const std::string& dir() const { return dir_; }

 private:
  explicit SmallDisk(std::string dir) : dir_(std::move(dir)) {}
  std::string dir_;
};

std::string Get(const TestServer& server, const char* path) {
  absl::StatusOr<HttpResult> got = HttpCall(server.http_port(), "GET", path);
  return got.ok() ? got->body : got.status().ToString();
}

TEST(FullDiskTest, IngestWaitsCommitsNothingTwiceSaysSoAndGoesOnWhenSpaceReturns) {
  std::string why;
  std::unique_ptr<SmallDisk> disk = SmallDisk::Mount("1m", why);
  if (disk == nullptr) GTEST_SKIP() << why;
  server::ServerOptions server_options;
  // Short, so that the full disk outlasts it: batches fail (UNAVAILABLE) and
  // come again while the stall goes on.
  server_options.store.writer.retry_for = absl::Seconds(1);
  ASSERT_OK_AND_ASSIGN(auto server, TestServer::Start(server_options));
  const std::string url = server->database_url();
  const std::string tablespace = absl::StrCat("metrics_full_disk_", ::getpid());
  ASSERT_OK(pgtest::QueryScalar(url, absl::StrCat("CREATE TABLESPACE ", tablespace,
                                                  " LOCATION '", disk->dir(), "'"))
                .status());
  for (const char* table : {"metrics_profiling", "system_rollups"}) {
    ASSERT_OK(pgtest::QueryScalar(
                  url, absl::StrCat("ALTER TABLE ", table, " SET TABLESPACE ", tablespace))
                  .status());
  }
  ASSERT_OK(CreateTrial(server->Channel(), 1));

  std::vector<v1::SystemMetricsBatch> batches(kDiskBatches);
  for (int b = 0; b < kDiskBatches; ++b) {
    batches[b].set_trial_id(1);
    batches[b].set_agent_id("node-1");
    DeclareRealisticSeries(batches[b]);
    for (int r = 0; r < kDiskReportsPerBatch; ++r) {
      const int i = b * kDiskReportsPerBatch + r;
      AddRealisticReport(batches[b], kDiskStart + absl::Seconds(i), i);
    }
  }
  std::atomic<int64_t> acked{0};
  StreamerOptions options;
  options.stream_id = "agent";
  options.trial_id = 1;
  options.timeout = absl::Minutes(3);
  options.on_ack = [&](int64_t a) { acked = a; };
  const std::string target = server->grpc_target();
  absl::Status streamed;
  std::thread agent([&] {
    ResendingStreamer streamer([&] { return target; }, options);
    streamed = streamer.SendAll(std::move(batches));
  });

  EXPECT_TRUE(Eventually(
      [&] {
        const std::string health = Get(*server, "/healthz");
        return absl::StrContains(health, "\"ingest\":\"STALLED\"") &&
               absl::StrContains(health, "the database server's disk is full");
      },
      absl::Seconds(60)))
      << Get(*server, "/healthz");
  EXPECT_TRUE(absl::StrContains(Get(*server, "/healthz"), "\"status\":\"SERVING\""));
  EXPECT_TRUE(absl::StrContains(Get(*server, "/metrics"), "\nmetricsd_database_disk_full 1\n"));
  // Every acknowledged batch is stored, and no more come while the disk is
  // full.
  const int64_t acked_when_full = acked;
  ASSERT_OK_AND_ASSIGN(const int64_t stored_when_full, pgtest::CountRawValues(url, 1));
  EXPECT_GE(stored_when_full, acked_when_full * kDiskReportsPerBatch * kRealisticValuesPerReport);
  EXPECT_LT(acked_when_full, kDiskBatches);
  absl::SleepFor(absl::Seconds(3));  // past the retry limit
  ASSERT_OK_AND_ASSIGN(const int64_t stored_later, pgtest::CountRawValues(url, 1));
  EXPECT_EQ(stored_later, stored_when_full);

  ASSERT_TRUE(disk->Grow("64m")) << std::strerror(errno);
  agent.join();
  EXPECT_OK(streamed);
  ASSERT_OK_AND_ASSIGN(const int64_t stored_at_the_end, pgtest::CountRawValues(url, 1));
  EXPECT_EQ(stored_at_the_end,
            int64_t{kDiskBatches} * kDiskReportsPerBatch * kRealisticValuesPerReport);
  EXPECT_TRUE(Eventually([&] {
    return !absl::StrContains(Get(*server, "/healthz"), "STALLED") &&
           absl::StrContains(Get(*server, "/metrics"), "\nmetricsd_database_disk_full 0\n");
  }, absl::Seconds(30))) << Get(*server, "/healthz");

  for (const char* table : {"metrics_profiling", "system_rollups"}) {
    EXPECT_OK(pgtest::QueryScalar(
                  url, absl::StrCat("ALTER TABLE ", table, " SET TABLESPACE pg_default"))
                  .status());
  }
  EXPECT_OK(pgtest::QueryScalar(url, absl::StrCat("DROP TABLESPACE ", tablespace)).status());
}

}  // namespace
}  // namespace metrics::test_util
