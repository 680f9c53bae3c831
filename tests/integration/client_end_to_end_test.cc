// The client library and metrics-agent against a real metricsd process on a
// throwaway database: the Reporter streams while metricsd is SIGKILLed and
// started again (everything acknowledged is stored, exactly once); the
// overflow policies drop the oldest or block until the server is back; and
// metrics-agent, with a fake NVML of two GPUs, produces series that
// QuerySeries answers, then stops cleanly on SIGTERM or when the trial ends;
// what its --once prints is what its stream stores.
#include <boost/json.hpp>
#include <grpcpp/create_channel.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <thread>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "client/reporter.h"
#include "common/subprocess.h"
#include "common/testing/eventually.h"
#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "proto/metrics/v1/query.grpc.pb.h"
#include "storage/pg/pg_metric_store.h"
#include "storage/pg/pg_token_store.h"
#include "storage/pg/testing/pg_checks.h"
#include "tests/testing/test_database.h"
#include "tests/testing/trials.h"

namespace metrics::test_util {

using ::metrics::common::Subprocess;
namespace {

namespace pgtest = ::metrics::storage::pg::test_util;
using ::metrics::client::Measurement;
using ::metrics::client::OverflowPolicy;
using ::metrics::client::Reporter;
using ::metrics::client::ReporterOptions;
using ::metrics::client::ReporterStats;
using ::testing::Contains;
using ::testing::HasSubstr;
using ::testing::Not;

const absl::Time kStart = absl::Now() - absl::Hours(2);

class ClientEndToEndTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_OK_AND_ASSIGN(db_, TestDatabase::Create()); }

  // Starts metricsd on `port` (0: any), with `flags` besides, and returns
  // the port it listens on. Without tokens unless `flags` ask for them.
  int StartMetricsd(int port = 0, std::vector<std::string> flags = {"--auth=off"}) {
    std::vector<std::string> argv = {
        METRICSD_PATH, "--database-url=" + db_->url(),
        absl::StrCat("--grpc-address=127.0.0.1:", port),
        "--http-address=127.0.0.1:0"};
    argv.insert(argv.end(), flags.begin(), flags.end());
    absl::StatusOr<std::unique_ptr<Subprocess>> p = Subprocess::Start(argv);
    EXPECT_OK(p);
    if (!p.ok()) return 0;
    absl::StatusOr<std::string> line =
        (*p)->WaitForLine("gRPC listening on", absl::Seconds(30));
    EXPECT_OK(line);
    if (!line.ok()) return 0;
    int bound = 0;
    EXPECT_TRUE(absl::SimpleAtoi(line->substr(line->rfind(':') + 1), &bound));
    metricsd_ = *std::move(p);
    target_ = absl::StrCat("127.0.0.1:", bound);
    return bound;
  }

  // Starts metricsd, registers `trial`, stops it, and returns the port it
  // used (0 on failure). A reporter pointed there waits for a server that
  // knows its trial when it comes back. Registering the trial only after
  // the server comes back would race the reporter's first batch, and a
  // trial that does not exist stops a reporter for good.
  int PortOfStoppedMetricsdWithTrial(int32_t trial) {
    const int port = StartMetricsd();
    if (port == 0) return 0;
    CreateTrial(trial);
    metricsd_->Signal(SIGTERM);
    EXPECT_OK(metricsd_->Wait(absl::Seconds(30)).status());
    return port;
  }

  std::shared_ptr<grpc::Channel> Channel() const {
    return grpc::CreateChannel(target_, grpc::InsecureChannelCredentials());
  }

  void CreateTrial(int32_t id) { ASSERT_OK(test_util::CreateTrial(Channel(), id)); }

  ReporterOptions Options(int32_t trial, int port) {
    ReporterOptions o;
    o.server_address = absl::StrCat("127.0.0.1:", port);
    o.trial_id = trial;
    o.agent_id = "trainer-0";
    o.initial_backoff = absl::Milliseconds(50);
    o.max_backoff = absl::Milliseconds(500);
    // Shown in the test's log, to tell what happened when one fails.
    o.on_event = [](absl::string_view e) {
      std::cerr << "[ reporter ] " << e << "\n";
    };
    return o;
  }

  int64_t Scalar(const std::string& sql) {
    absl::StatusOr<std::string> text = pgtest::QueryScalar(db_->url(), sql);
    EXPECT_OK(text);
    int64_t n = -1;
    EXPECT_TRUE(text.ok() && absl::SimpleAtoi(*text, &n)) << sql;
    return n;
  }

  std::unique_ptr<TestDatabase> db_;
  std::unique_ptr<Subprocess> metricsd_;
  std::string target_;
};

TEST_F(ClientEndToEndTest, ServerKilledMidRunLosesAndDuplicatesNothing) {
  const int port = StartMetricsd();
  ASSERT_NE(port, 0);
  CreateTrial(1);
  ReporterOptions options = Options(1, port);
  options.max_batch_samples = 500;
  options.buffer_samples = 1000000;
  ASSERT_OK_AND_ASSIGN(auto reporter, Reporter::Create(options));

  constexpr int kReports = 10000;
  constexpr int kGpus = 8;
  std::thread producer([&] {
    std::vector<std::string> uuids;
    for (int g = 0; g < kGpus; ++g) uuids.push_back(absl::StrCat("GPU-", g));
    for (int i = 0; i < kReports; ++i) {
      std::vector<Measurement> values = {
          {"cpu_util_simple", i % 100 * 1.0, "percent"},
          {"memory_free", 1e9 + i, "bytes"}};
      for (const std::string& uuid : uuids) {
        values.push_back({"gpu_util", double(i % 101), "percent", uuid});
      }
      EXPECT_OK(reporter->Record(kStart + absl::Milliseconds(10 * i), values));
    }
  });
  // Kill metricsd once part of the run is stored and batches are in flight:
  // some of them committed with the answer lost, some not committed.
  ReporterStats at_kill;
  test_util::Eventually(
      [&] {
        at_kill = reporter->stats();
        return at_kill.acknowledged >= 10000 &&
               at_kill.sent - at_kill.acknowledged >= 1000;
      },
      absl::Seconds(60), absl::Microseconds(200));
  metricsd_->Signal(SIGKILL);
  ASSERT_OK(metricsd_->Wait(absl::Seconds(30)).status());
  ASSERT_EQ(StartMetricsd(port), port);
  producer.join();
  ASSERT_OK(reporter->Flush(absl::Now() + absl::Seconds(120)));
  ASSERT_OK(reporter->Shutdown(absl::Now() + absl::Seconds(10)));

  const ReporterStats s = reporter->stats();
  const int64_t total = int64_t{kReports} * (2 + kGpus);
  EXPECT_GT(at_kill.acknowledged, 0);
  EXPECT_GT(at_kill.sent - at_kill.acknowledged, 0) << "nothing was in flight";
  EXPECT_LT(at_kill.acknowledged, total) << "the kill came after the run";
  EXPECT_EQ(s.recorded, total);
  EXPECT_EQ(s.acknowledged, total);
  EXPECT_EQ(s.dropped + s.rejected + s.unsent, 0);
  EXPECT_GE(s.connections, 2);
  ASSERT_OK_AND_ASSIGN(int64_t stored, pgtest::CountRawValues(db_->url(), 1));
  EXPECT_EQ(stored, s.acknowledged);
  // One row per report (agent, instant): a resent batch stored twice would
  // repeat instants.
  EXPECT_EQ(Scalar("SELECT count(*) - count(DISTINCT (agent_id, end_time)) "
                   "FROM metrics WHERE trial_id = 1"),
            0);
  ASSERT_OK_AND_ASSIGN(int64_t buckets,
                       pgtest::CheckRollupsMatchRawRows(db_->url(), 1));
  EXPECT_GT(buckets, 0);
  std::cout << "[ figures ] at the kill: " << at_kill.acknowledged
            << " acknowledged, " << at_kill.sent - at_kill.acknowledged
            << " in flight, of " << total << "; connections " << s.connections
            << "; samples resent " << s.retried << "\n";
}

TEST_F(ClientEndToEndTest, DropOldestKeepsTheNewestUntilTheServerComes) {
  const int port = PortOfStoppedMetricsdWithTrial(2);
  ASSERT_NE(port, 0);
  ReporterOptions options = Options(2, port);
  options.buffer_samples = 100;
  options.max_batch_samples = 10;
  options.overflow = OverflowPolicy::kDropOldest;
  ASSERT_OK_AND_ASSIGN(auto reporter, Reporter::Create(options));
  for (int i = 0; i < 250; ++i) {
    ASSERT_OK(reporter->Record(kStart + absl::Seconds(i),
                               {{"memory_free", double(i), "bytes"}}));
  }
  EXPECT_EQ(reporter->stats().dropped, 150);
  ASSERT_EQ(StartMetricsd(port), port);
  ASSERT_OK(reporter->Flush(absl::Now() + absl::Seconds(60)));
  ASSERT_OK_AND_ASSIGN(
      auto stored, pgtest::RawSamplesOf(db_->url(), 2, "trainer-0", "",
                                        "memory_free", 0, INT64_MAX));
  ASSERT_EQ(stored.size(), 100u);
  for (size_t i = 0; i < stored.size(); ++i) {
    EXPECT_EQ(stored[i].second, 150.0 + i);  // the 100 newest, in order
  }
  EXPECT_EQ(reporter->stats().acknowledged, 100);
}

TEST_F(ClientEndToEndTest, BlockedRecordGoesOnWhenTheServerComes) {
  const int port = PortOfStoppedMetricsdWithTrial(3);
  ASSERT_NE(port, 0);
  ReporterOptions options = Options(3, port);
  options.buffer_samples = 100;
  options.max_batch_samples = 10;
  options.overflow = OverflowPolicy::kBlock;
  options.block_timeout = absl::Seconds(120);
  ASSERT_OK_AND_ASSIGN(auto reporter, Reporter::Create(options));
  for (int i = 0; i < 100; ++i) {
    ASSERT_OK(reporter->Record(kStart + absl::Seconds(i),
                               {{"memory_free", double(i), "bytes"}}));
  }
  std::atomic<bool> returned{false};
  absl::Status blocked_result;
  std::thread blocked([&] {
    blocked_result = reporter->Record(kStart + absl::Seconds(100),
                                      {{"memory_free", 100, "bytes"}});
    returned = true;
  });
  absl::SleepFor(absl::Milliseconds(300));
  EXPECT_FALSE(returned) << "Record did not wait for room";
  ASSERT_EQ(StartMetricsd(port), port);
  blocked.join();
  EXPECT_OK(blocked_result);
  ASSERT_OK(reporter->Flush(absl::Now() + absl::Seconds(60)));
  EXPECT_EQ(reporter->stats().dropped, 0);
  ASSERT_OK_AND_ASSIGN(int64_t stored, pgtest::CountRawValues(db_->url(), 3));
  EXPECT_EQ(stored, 101);
}

// The agent's series of a trial, as "name/gpu" strings.
std::vector<std::string> SeriesNames(const std::string& target, int32_t trial) {
  auto stub = v1::QueryService::NewStub(
      grpc::CreateChannel(target, grpc::InsecureChannelCredentials()));
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
  v1::ListSeriesRequest request;
  request.set_trial_id(trial);
  v1::ListSeriesResponse response;
  std::vector<std::string> names;
  if (!stub->ListSeries(&context, request, &response).ok()) return names;
  for (const v1::Series& s : response.series()) {
    names.push_back(absl::StrCat(s.name(), "/", s.gpu_uuid()));
  }
  return names;
}

TEST_F(ClientEndToEndTest, AgentSamplesAppearInQuerySeriesAndStopCleanly) {
  ASSERT_NE(StartMetricsd(), 0);
  CreateTrial(4);
  // The job's cgroup: a v2 fixture tree with a 2 GiB memory limit.
  const std::filesystem::path cgroups =
      std::filesystem::temp_directory_path() /
      absl::StrCat("client_end_to_end_cgroup_", getpid());
  std::filesystem::create_directories(cgroups / "job");
  for (const auto& [file, text] :
       {std::pair("cgroup.controllers", "cpu memory\n"),
        std::pair("job/cpu.stat", "usage_usec 1000\n"),
        std::pair("job/memory.current", "1048576\n"),
        std::pair("job/memory.max", "2147483648\n")}) {
    std::ofstream(cgroups / file) << text;
  }
  ASSERT_OK_AND_ASSIGN(
      auto agent,
      Subprocess::Start({METRICS_AGENT_PATH, "--server=" + target_,
                         "--trial-id=4", "--agent-id=gpu-host",
                         "--interval=100ms", absl::StrCat("--pid=", getpid()),
                         "--cgroup=/job", "--cgroup-root=" + cgroups.string()},
                        {absl::StrCat("LD_LIBRARY_PATH=", FAKE_NVML_DIR),
                         // This test's process is the job; it uses 256 MiB
                         // of GPU 0 and 512 MiB of GPU 1; pid 1 is not ours.
                         absl::StrCat("FAKE_NVML_PROCESSES=", getpid(), ":256,1:64")}));
  ASSERT_OK(agent->WaitForLine("with 2 GPU(s)", absl::Seconds(30)).status());
  const std::string gpu0 = "GPU-00000000-0000-0000-0000-000000000000";
  const std::string gpu1 = "GPU-00000000-0000-0000-0000-000000000001";
  // Five samples of every series (the first rates need two readings).
  EXPECT_TRUE(test_util::Eventually(
      [&] { return Scalar("SELECT count(*) FROM metrics WHERE trial_id = 4") >= 5; },
      absl::Seconds(60), absl::Milliseconds(50)));
  agent->Signal(SIGTERM);
  ASSERT_OK_AND_ASSIGN(int code, agent->Wait(absl::Seconds(30)));
  EXPECT_EQ(code, 0) << agent->stderr_text();
  EXPECT_THAT(agent->stderr_text(), HasSubstr("0 unsent"));

  const std::vector<std::string> names = SeriesNames(target_, 4);
  for (const char* expected :
       {"cpu_util_simple/", "memory_free/", "disk_iops/",
        "disk_throughput_read/", "disk_throughput_write/",
        "net_throughput_sent/", "net_throughput_recv/"}) {
    EXPECT_THAT(names, Contains(expected));
  }
  EXPECT_THAT(names, Contains("gpu_util/" + gpu0));
  EXPECT_THAT(names, Contains("gpu_free_memory/" + gpu1));
  // The job's share (--pid): its process tree's CPU and memory, and the GPU
  // memory of its processes only.
  EXPECT_THAT(names, Contains("process_cpu_util/"));
  EXPECT_THAT(names, Contains("process_memory_rss/"));
  EXPECT_THAT(names, Contains("process_gpu_memory/" + gpu1));
  EXPECT_EQ(Scalar("SELECT max((v->>'" + gpu1 + "')::float8) FROM (SELECT "
                   "metrics->'process_gpu_memory' AS v FROM metrics_unpacked "
                   "WHERE trial_id = 4) s"),
            512 << 20);
  EXPECT_GT(Scalar("SELECT min((metrics->>'process_memory_rss')::float8) "
                   "FROM metrics_unpacked WHERE trial_id = 4"),
            0);
  EXPECT_EQ(Scalar("SELECT max((metrics->>'cgroup_memory_limit')::float8) "
                   "FROM metrics_unpacked WHERE trial_id = 4"),
            int64_t{2} << 30);
  EXPECT_THAT(names, Contains("cgroup_cpu_util/"));
  std::filesystem::remove_all(cgroups);

  // The fake GPU 1 runs at 30 %, so every bucket of it is exactly 30.
  auto stub = v1::QueryService::NewStub(
      grpc::CreateChannel(target_, grpc::InsecureChannelCredentials()));
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
  v1::QuerySeriesRequest request;
  request.set_trial_id(4);
  request.add_name("gpu_util");
  request.add_gpu_uuid(gpu1);
  v1::QuerySeriesResponse response;
  ASSERT_TRUE(stub->QuerySeries(&context, request, &response).ok());
  ASSERT_EQ(response.series_size(), 1);
  const v1::SeriesBuckets& b = response.series(0);
  ASSERT_GE(b.max_size(), 1);
  int64_t samples = 0;
  for (int i = 0; i < b.max_size(); ++i) {
    EXPECT_EQ(b.min(i), 30);
    EXPECT_EQ(b.max(i), 30);
    samples += b.count(i);
  }
  EXPECT_GE(samples, 5);
  // The agent's own count of what the server acknowledged matches the store.
  const std::string& log = agent->stderr_text();
  const size_t at = log.rfind(" acknowledged, ");
  ASSERT_NE(at, std::string::npos) << log;
  const size_t from = log.rfind(", ", at) + 2;
  int64_t acknowledged = 0;
  ASSERT_TRUE(absl::SimpleAtoi(log.substr(from, at - from), &acknowledged)) << log;
  ASSERT_OK_AND_ASSIGN(int64_t stored, pgtest::CountRawValues(db_->url(), 4));
  EXPECT_EQ(stored, acknowledged);

  // What hardware it ran on, as GetTrial tells.
  ASSERT_OK_AND_ASSIGN(v1::Trial trial, GetTrial(Channel(), 4));
  ASSERT_EQ(trial.agents_size(), 1);
  const v1::AgentInventory& inventory = trial.agents(0).inventory();
  EXPECT_EQ(inventory.agent_version(), "metrics-agent 1.0.0");
  EXPECT_GT(inventory.cpu_count(), 0);
  EXPECT_GT(inventory.memory_total_bytes(), 0);
  EXPECT_FALSE(inventory.host_name().empty());
  EXPECT_EQ(inventory.driver_version(), "550.54.15");
  EXPECT_EQ(inventory.cuda_version(), "12.4");
  EXPECT_EQ(inventory.gpu_status(), "");
  ASSERT_EQ(inventory.gpus_size(), 2);
  EXPECT_EQ(inventory.gpus(1).uuid(), gpu1);
  EXPECT_EQ(inventory.gpus(1).name(), "Fake GPU 16GB");
  EXPECT_EQ(inventory.gpus(1).memory_total_bytes(), int64_t{16} << 30);
  EXPECT_TRUE(inventory.has_received_at());
}

// `metrics-agent --once --json` promises what the agent would send: the
// series a stream of the same agent then stores are the ones it printed,
// and so is the inventory's list of GPUs.
TEST_F(ClientEndToEndTest, AgentOnceShowsTheSeriesItsStreamStores) {
  const std::vector<std::string> flags = {"--interval=100ms", absl::StrCat("--pid=", getpid())};
  const std::vector<std::string> env = {absl::StrCat("LD_LIBRARY_PATH=", FAKE_NVML_DIR),
                                        absl::StrCat("FAKE_NVML_PROCESSES=", getpid(), ":256")};
  std::vector<std::string> once = {METRICS_AGENT_PATH, "--once", "--json"};
  once.insert(once.end(), flags.begin(), flags.end());
  ASSERT_OK_AND_ASSIGN(auto printer, Subprocess::Start(once, env));
  ASSERT_OK_AND_ASSIGN(int code, printer->Wait(absl::Seconds(30)));
  ASSERT_EQ(code, 0) << printer->stderr_text();
  const boost::json::value printed = boost::json::parse(printer->stdout_text());
  std::vector<std::string> printed_series;
  for (const boost::json::value& s : printed.at("series").as_array()) {
    const boost::json::value* gpu = s.as_object().if_contains("gpu_uuid");
    printed_series.push_back(absl::StrCat(
        std::string(s.at("name").as_string()), "/",
        gpu == nullptr ? "" : std::string(gpu->as_string())));
  }
  std::vector<std::string> printed_gpus;
  for (const boost::json::value& g : printed.at("inventory").at("gpus").as_array()) {
    printed_gpus.emplace_back(g.at("uuid").as_string());
  }
  ASSERT_EQ(printed_gpus.size(), 2u);

  ASSERT_NE(StartMetricsd(), 0);
  CreateTrial(8);
  std::vector<std::string> stream = {METRICS_AGENT_PATH, "--server=" + target_, "--trial-id=8"};
  stream.insert(stream.end(), flags.begin(), flags.end());
  ASSERT_OK_AND_ASSIGN(auto agent, Subprocess::Start(stream, env));
  EXPECT_TRUE(test_util::Eventually(
      [&] { return Scalar("SELECT count(*) FROM metrics WHERE trial_id = 8") >= 3; },
      absl::Seconds(60), absl::Milliseconds(50)));
  agent->Signal(SIGTERM);
  ASSERT_OK_AND_ASSIGN(code, agent->Wait(absl::Seconds(30)));
  EXPECT_EQ(code, 0) << agent->stderr_text();
  EXPECT_THAT(SeriesNames(target_, 8), testing::UnorderedElementsAreArray(printed_series));
  ASSERT_OK_AND_ASSIGN(v1::Trial trial, GetTrial(Channel(), 8));
  ASSERT_EQ(trial.agents_size(), 1);
  std::vector<std::string> stored_gpus;
  for (const v1::GpuInventory& g : trial.agents(0).inventory().gpus()) {
    stored_gpus.push_back(g.uuid());
  }
  EXPECT_EQ(stored_gpus, printed_gpus);

  // --json belongs to --once.
  ASSERT_OK_AND_ASSIGN(auto wrong, Subprocess::Start({METRICS_AGENT_PATH, "--json",
                                                      "--trial-id=8"}));
  ASSERT_OK_AND_ASSIGN(code, wrong->Wait(absl::Seconds(30)));
  EXPECT_EQ(code, 2);
  EXPECT_THAT(wrong->stderr_text(), HasSubstr("metrics-agent: --json: only with --once"));
}

TEST_F(ClientEndToEndTest, AgentWithoutNvmlSaysSoAndStopsWhenTheTrialEnds) {
  ASSERT_NE(StartMetricsd(), 0);
  CreateTrial(5);
  ASSERT_OK_AND_ASSIGN(
      auto agent,
      Subprocess::Start({METRICS_AGENT_PATH, "--server=" + target_,
                         "--trial-id=5", "--interval=100ms",
                         "--nvml-library=/nonexistent/libnvidia-ml.so.1"}));
  ASSERT_OK(agent->WaitForLine("no GPU metrics", absl::Seconds(30)).status());
  EXPECT_TRUE(test_util::Eventually(
      [&] { return Scalar("SELECT count(*) FROM metrics WHERE trial_id = 5") >= 2; },
      absl::Seconds(60), absl::Milliseconds(50)));
  ASSERT_OK(CompleteTrial(Channel(), 5));
  ASSERT_OK_AND_ASSIGN(int code, agent->Wait(absl::Seconds(30)));
  EXPECT_EQ(code, 0) << agent->stderr_text();
  EXPECT_THAT(agent->stderr_text(), HasSubstr("COMPLETED"));
  const std::vector<std::string> names = SeriesNames(target_, 5);
  EXPECT_THAT(names, Contains("cpu_util_simple/"));
  for (const std::string& n : names) EXPECT_THAT(n, Not(HasSubstr("gpu")));
  // The trial says why there are no GPU series.
  ASSERT_OK_AND_ASSIGN(v1::Trial trial, GetTrial(Channel(), 5));
  ASSERT_EQ(trial.agents_size(), 1);
  EXPECT_EQ(trial.agents(0).inventory().gpu_status(),
            "NVML not available: /nonexistent/libnvidia-ml.so.1 not found");
  EXPECT_EQ(trial.agents(0).inventory().gpus_size(), 0);
}

TEST_F(ClientEndToEndTest, AgentWithATokenFileReportsWhenAuthIsRequired) {
  ASSERT_NE(StartMetricsd(0, {"--auth=required"}), 0);
  storage::pg::PgMetricStoreOptions store;
  store.database_url = db_->url();
  ASSERT_OK(storage::pg::PgMetricStore::Create(store)->CreateTrial(
      6, absl::Now() + absl::Seconds(30)));
  storage::pg::PgTokenStore tokens(db_->url());
  storage::TokenRequest request;
  request.role = storage::TokenRole::kReporter;
  request.trial_id = 6;
  ASSERT_OK_AND_ASSIGN(storage::CreatedToken token,
                       tokens.Create(request, absl::Now() + absl::Seconds(30)));
  const std::string path = ::testing::TempDir() + "/metrics-agent-token";
  std::ofstream(path) << token.secret << "\n";

  ASSERT_OK_AND_ASSIGN(
      auto agent,
      Subprocess::Start({METRICS_AGENT_PATH, "--server=" + target_,
                         "--trial-id=6", "--interval=100ms",
                         "--token-file=" + path,
                         "--nvml-library=/nonexistent/libnvidia-ml.so.1"}));
  EXPECT_TRUE(test_util::Eventually(
      [&] { return Scalar("SELECT count(*) FROM metrics WHERE trial_id = 6") >= 2; },
      absl::Seconds(60), absl::Milliseconds(50)));
  agent->Signal(SIGTERM);
  ASSERT_OK_AND_ASSIGN(int code, agent->Wait(absl::Seconds(30)));
  EXPECT_EQ(code, 0) << agent->stderr_text();
  metricsd_->Signal(SIGTERM);
  ASSERT_OK(metricsd_->Wait(absl::Seconds(30)).status());
  // The token appears in no output of either process.
  const std::string secret = token.secret.substr(4);
  for (const std::string* text :
       {&agent->stdout_text(), &agent->stderr_text(), &metricsd_->stdout_text(),
        &metricsd_->stderr_text()}) {
    EXPECT_THAT(*text, Not(HasSubstr(secret)));
  }
  // A missing token file is one clear line, naming the file only.
  ASSERT_OK_AND_ASSIGN(
      auto missing,
      Subprocess::Start({METRICS_AGENT_PATH, "--server=" + target_,
                         "--trial-id=6", "--token-file=/nonexistent/token"}));
  ASSERT_OK_AND_ASSIGN(code, missing->Wait(absl::Seconds(30)));
  EXPECT_EQ(code, 2);
  EXPECT_THAT(missing->stderr_text(),
              HasSubstr("metrics-agent: --token-file /nonexistent/token: No "
                        "such file or directory"));
}

}  // namespace
}  // namespace metrics::test_util
