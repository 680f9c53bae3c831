// Exports as a user downloads them, from a real server on a real
// PostgreSQL: the CSV of raw samples over HTTP (every value bit for bit, in
// time order, filters, GPU indexes, an expired window answered by rollups
// that say so), the Chrome trace (well-formed events, names, units, a golden
// file, alignment to a torch trace's base time), errors as JSON before the
// body, a failure after the body started (a truncated download), and a
// multi-million-value export with metricsd's memory flat while the file
// streams.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <map>
#include <random>
#include <thread>
#include <tuple>

#include <boost/json.hpp>
#include <grpcpp/client_context.h>
#include <grpcpp/create_channel.h>
#include <grpcpp/security/credentials.h>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/match.h"
#include "absl/time/clock.h"
#include "common/testing/eventually.h"
#include "common/testing/status_matchers.h"
#include "common/time_format.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "proto/metrics/v1/ingest.grpc.pb.h"
#include "proto/metrics/v1/query.grpc.pb.h"
#include "storage/pg/jobs/raw_retention.h"
#include "storage/pg/testing/pg_checks.h"
#include "tests/testing/http_client.h"
#include "tests/testing/report_with_retry.h"
#include "tests/testing/metricsd_process.h"
#include "tests/testing/realistic_batch.h"
#include "tests/testing/test_database.h"
#include "tests/testing/test_server.h"
#include "tests/testing/trials.h"

namespace metrics {
namespace {

using ::metrics::test_util::HttpCall;
using ::metrics::test_util::HttpResult;
using ::metrics::test_util::TestServer;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

// A whole number of 10-minute buckets, about two hours ago.
const int64_t kT0 = (absl::ToUnixSeconds(absl::Now()) - 7200) / 600 * 600 * int64_t{1000000};

struct Point {
  std::string agent, name, gpu;
  int64_t time_us;
  double value;
};

// Stores `points` of one agent as one batch (series declared in order).
void Store(const std::shared_ptr<grpc::Channel>& channel, int32_t trial,
           const std::string& agent, const std::vector<Point>& points) {
  v1::ReportSystemMetricsRequest request;
  v1::SystemMetricsBatch* batch = request.mutable_batch();
  batch->set_trial_id(trial);
  batch->set_agent_id(agent);
  std::map<std::pair<std::string, std::string>, int> index;
  for (const Point& p : points) {
    auto [it, added] = index.emplace(std::pair(p.name, p.gpu), index.size());
    if (added) {
      v1::SeriesDeclaration* s = batch->add_series();
      s->set_name(p.name);
      s->set_gpu_uuid(p.gpu);
      s->set_unit(p.name == "gpu_util" || p.name == "cpu_util_simple" ? "percent" : "bytes");
    }
    v1::SystemMetricsReport* r = batch->add_reports();
    r->mutable_time()->set_seconds(p.time_us / 1000000);
    r->mutable_time()->set_nanos(static_cast<int32_t>(p.time_us % 1000000) * 1000);
    r->add_series(it->second);
    r->add_values(p.value);
  }
  grpc::ClientContext context;
  v1::ReportSystemMetricsResponse response;
  const grpc::Status status =
      v1::IngestService::NewStub(channel)->ReportSystemMetrics(&context, request, &response);
  ASSERT_TRUE(status.ok()) << status.error_message();
}

std::string Rfc3339(int64_t time_us) {
  return absl::FormatTime("%Y-%m-%dT%H:%M:%E6SZ", absl::FromUnixMicros(time_us),
                          absl::UTCTimeZone());
}

// Any finite double, from random bits: the values a CSV must not round.
double RandomValue(std::mt19937_64& bits) {
  while (true) {
    const uint64_t b = bits();
    double v;
    std::memcpy(&v, &b, sizeof v);
    if (std::isfinite(v)) return v;
  }
}

// The body of a chunked response as sent.
std::string Dechunk(const std::string& body) {
  std::string out;
  size_t at = 0;
  while (at < body.size()) {
    const size_t line_end = body.find("\r\n", at);
    size_t size = 0;
    if (line_end == std::string::npos ||
        !absl::SimpleHexAtoi(body.substr(at, line_end - at), &size) || size == 0) {
      break;
    }
    out += body.substr(line_end + 2, size);
    at = line_end + 2 + size + 2;
  }
  return out;
}

class ExportTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_OK_AND_ASSIGN(server_, TestServer::Start());
    ASSERT_OK(test_util::CreateTrial(server_->Channel(), 1));
  }

  HttpResult Get(const std::string& path) {
    absl::StatusOr<HttpResult> result =
        HttpCall(server_->http_port(), "GET", path, "", absl::Seconds(60));
    EXPECT_OK(result.status());
    if (!result.ok()) return HttpResult{};
    if (result->headers["transfer-encoding"] == "chunked") result->body = Dechunk(result->body);
    return *result;
  }

  // Two agents, each with an agent-wide series and a series per GPU (two
  // GPUs), a sample of each every 10 ms and some at the same microsecond.
  std::vector<Point> StoreTwoAgents(int reports_per_agent) {
    std::mt19937_64 bits(7);
    std::vector<Point> all;
    for (const std::string agent : {"node-b", "node-a"}) {
      std::vector<Point> points;
      for (int i = 0; i < reports_per_agent; ++i) {
        const int64_t t = kT0 + i * 10000 + (agent == "node-a" ? 3 : 0);
        points.push_back({agent, "cpu_util_simple", "", t, RandomValue(bits)});
        points.push_back({agent, "gpu_util", "GPU-" + agent + "-0", t, RandomValue(bits)});
        points.push_back({agent, "gpu_util", "GPU-" + agent + "-1", t, RandomValue(bits)});
      }
      Store(server_->Channel(), 1, agent, points);
      all.insert(all.end(), points.begin(), points.end());
    }
    return all;
  }

  std::unique_ptr<TestServer> server_;
};

// One CSV line's fields (no quoted fields in these tests).
std::vector<std::string> Fields(absl::string_view line) {
  return absl::StrSplit(line, ',');
}

TEST_F(ExportTest, CsvHoldsEverySampleInTimeOrderBitForBit) {
  const std::vector<Point> points = StoreTwoAgents(1500);
  const HttpResult csv = Get("/api/v1/trials/1/metrics/system/export.csv");
  ASSERT_EQ(csv.status, 200) << csv.body;
  EXPECT_EQ(csv.headers.at("content-type"), "text/csv; charset=utf-8");
  EXPECT_EQ(csv.headers.at("content-disposition"),
            "attachment; filename=\"trial-1-system-metrics.csv\"");
  std::vector<absl::string_view> lines = absl::StrSplit(csv.body, '\n');
  ASSERT_EQ(lines.back(), "");
  lines.pop_back();
  ASSERT_EQ(lines.size(), points.size() + 1);
  EXPECT_EQ(lines[0], "time,agent_id,gpu_index,gpu_uuid,name,unit,value");

  std::map<std::tuple<int64_t, std::string, std::string, std::string>, double> sent;
  for (const Point& p : points) sent[{p.time_us, p.agent, p.name, p.gpu}] = p.value;
  std::string previous_time;
  for (size_t i = 1; i < lines.size(); ++i) {
    const std::vector<std::string> f = Fields(lines[i]);
    ASSERT_EQ(f.size(), 7u) << lines[i];
    EXPECT_GE(f[0], previous_time) << "line " << i << " goes back in time";
    previous_time = f[0];
    absl::Time t;
    std::string error;
    ASSERT_TRUE(absl::ParseTime(absl::RFC3339_full, f[0], &t, &error)) << f[0];
    const auto it = sent.find({absl::ToUnixMicros(t), f[1], f[4], f[3]});
    ASSERT_NE(it, sent.end()) << lines[i];
    const double value = std::strtod(f[6].c_str(), nullptr);
    EXPECT_EQ(std::memcmp(&value, &it->second, sizeof value), 0) << lines[i];
    EXPECT_EQ(f[5], "percent");
    // GPUs numbered in the order the agent first reported them.
    EXPECT_EQ(f[2], f[3].empty() ? "" : f[3].substr(f[3].size() - 1)) << lines[i];
    sent.erase(it);
  }
  EXPECT_TRUE(sent.empty());
}

TEST_F(ExportTest, CsvFiltersBySeriesAgentGpuAndWindow) {
  StoreTwoAgents(200);
  const int64_t from = kT0 + 500000, to = kT0 + 1000000;
  const HttpResult csv = Get(absl::StrCat(
      "/api/v1/trials/1/metrics/system/export.csv?name=gpu_util&agentId=node-a"
      "&gpuUuid=GPU-node-a-1&start=",
      Rfc3339(from), "&end=", Rfc3339(to)));
  ASSERT_EQ(csv.status, 200) << csv.body;
  std::vector<absl::string_view> lines = absl::StrSplit(csv.body, '\n');
  lines.pop_back();
  ASSERT_EQ(lines.size(), 1u + 50);  // a sample every 10 ms in half a second
  EXPECT_EQ(lines[1].substr(0, 27), Rfc3339(from + 3));
  for (size_t i = 1; i < lines.size(); ++i) {
    EXPECT_THAT(lines[i], HasSubstr(",node-a,1,GPU-node-a-1,gpu_util,percent,"));
  }
  // Agent-wide series only, through gpuUuid="".
  const HttpResult agent_wide =
      Get("/api/v1/trials/1/metrics/system/export.csv?gpuUuid=&agentId=node-b");
  ASSERT_EQ(agent_wide.status, 200);
  EXPECT_EQ(std::count(agent_wide.body.begin(), agent_wide.body.end(), '\n'), 1 + 200);
  EXPECT_THAT(agent_wide.body, ::testing::Not(HasSubstr("gpu_util")));
  // A selection of nothing is a header alone.
  const HttpResult none = Get("/api/v1/trials/1/metrics/system/export.csv?name=no_such");
  EXPECT_EQ(none.status, 200);
  EXPECT_EQ(none.body, "time,agent_id,gpu_index,gpu_uuid,name,unit,value\n");
}

TEST_F(ExportTest, AnExpiredWindowIsExportedFromRollupsThatSaySo) {
  // One series, a sample a second for 300 s: 5 buckets of 1 min.
  std::vector<Point> points;
  for (int i = 0; i < 300; ++i) {
    points.push_back({"node-a", "gpu_util", "GPU-0", kT0 + i * int64_t{1000000} + 1, 1.0 * i});
  }
  Store(server_->Channel(), 1, "node-a", points);
  // Raw samples before kT0 + 95 s go (the run seals the window first):
  // buckets stand in up to kT0 + 120 s.
  storage::pg::RetentionOptions retention;
  retention.database_url = server_->database_url();
  retention.raw_retention = absl::Seconds(1);
  retention.now = absl::FromUnixMicros(kT0 + 95000000) + absl::Seconds(1);
  ASSERT_OK(storage::pg::ApplyRawRetention(retention).status());

  const HttpResult csv = Get("/api/v1/trials/1/metrics/system/export.csv");
  ASSERT_EQ(csv.status, 200) << csv.body;
  std::vector<absl::string_view> lines = absl::StrSplit(csv.body, '\n');
  lines.pop_back();
  ASSERT_EQ(lines.size(), 1u + 2 + 180);
  EXPECT_EQ(lines[0], "time,agent_id,gpu_index,gpu_uuid,name,unit,value,bucket_seconds,min,max,count");
  for (int b = 0; b < 2; ++b) {
    // Samples 60b .. 60b+59: mean 60b + 29.5.
    EXPECT_EQ(lines[1 + b], absl::StrCat(Rfc3339(kT0 + b * int64_t{60000000}),
                                         ",node-a,0,GPU-0,gpu_util,percent,", 60 * b + 29.5, ",60,",
                                         60 * b, ",", 60 * b + 59, ",60"));
  }
  EXPECT_EQ(lines[3], absl::StrCat(Rfc3339(kT0 + 120000001), ",node-a,0,GPU-0,gpu_util,percent,120,,,,"));
  EXPECT_EQ(lines.back(), absl::StrCat(Rfc3339(kT0 + 299000001), ",node-a,0,GPU-0,gpu_util,percent,299,,,,"));
  // A window after the horizon is raw as ever.
  const HttpResult recent = Get(absl::StrCat("/api/v1/trials/1/metrics/system/export.csv?start=",
                                             Rfc3339(kT0 + 150000000)));
  EXPECT_THAT(recent.body, ::testing::StartsWith("time,agent_id,gpu_index,gpu_uuid,name,unit,value\n"));
}

TEST_F(ExportTest, BadRequestsAreRefusedAsJsonBeforeAnyOfTheFile) {
  StoreTwoAgents(10);
  const HttpResult backwards = Get(absl::StrCat(
      "/api/v1/trials/1/metrics/system/export.csv?start=", Rfc3339(kT0 + 10), "&end=", Rfc3339(kT0)));
  EXPECT_EQ(backwards.status, 400);
  EXPECT_THAT(backwards.body, HasSubstr("is not before end"));
  EXPECT_EQ(backwards.headers.at("content-type"), "application/json");
  const HttpResult unknown = Get("/api/v1/trials/99/metrics/system/export.csv");
  EXPECT_EQ(unknown.status, 404);
  EXPECT_THAT(unknown.body, HasSubstr("99"));
  const HttpResult bad_time = Get("/api/v1/trials/1/metrics/system/trace?start=yesterday");
  EXPECT_EQ(bad_time.status, 400);
  EXPECT_THAT(bad_time.body, HasSubstr("start"));
  const HttpResult negative = Get("/api/v1/trials/1/metrics/system/trace?baseTimeNanoseconds=-1");
  EXPECT_EQ(negative.status, 400);
  EXPECT_THAT(negative.body, HasSubstr("base_time_nanoseconds"));
  const HttpResult points = Get("/api/v1/trials/1/metrics/system/trace?maxPoints=0");
  EXPECT_EQ(points.status, 400);
  EXPECT_THAT(points.body, HasSubstr("max_points"));
}

TEST_F(ExportTest, TheTraceIsAGoldenFileOfCountersPerAgentAndSeries) {
  Store(server_->Channel(), 1, "node-a",
        {{"node-a", "cpu_util_simple", "", kT0 + 1000000, 12.5},
         {"node-a", "gpu_util", "GPU-7f", kT0 + 1000000, 99},
         {"node-a", "cpu_util_simple", "", kT0 + 2000000, 0.1}});
  Store(server_->Channel(), 1, "node-b", {{"node-b", "cpu_util_simple", "", kT0 + 1500000, 50}});
  // torch.profiler's base: a second before the first sample, to the ns.
  const int64_t base_ns = (kT0 - 1000000) * 1000 + 250;
  const HttpResult trace = Get(absl::StrCat("/api/v1/trials/1/metrics/system/trace?baseTimeNanoseconds=",
                                            base_ns));
  ASSERT_EQ(trace.status, 200) << trace.body;
  EXPECT_EQ(trace.headers.at("content-type"), "application/json");
  const std::string start = common::Rfc3339(absl::FromUnixMicros(kT0 + 1000000));
  const std::string end = common::Rfc3339(absl::FromUnixMicros(kT0 + 2000001));
  EXPECT_EQ(trace.body,
            absl::StrCat(
                R"j({"displayTimeUnit":"ms","baseTimeNanoseconds":)j", base_ns,
                R"j(,"otherData":{"producer":"metricsd","trial_id":1,"start":")j",
                start, R"j(","end":")j", end,
                R"j(","resolution_us":0,"raw_expired":false},"traceEvents":[)j"
                R"j({"name":"process_name","ph":"M","pid":1000000000,"tid":0,"args":{"name":"system metrics: node-a"}},)j"
                "\n"
                R"j({"name":"process_sort_index","ph":"M","pid":1000000000,"tid":0,"args":{"sort_index":1000000}},)j"
                "\n"
                R"j({"name":"process_name","ph":"M","pid":1000000001,"tid":0,"args":{"name":"system metrics: node-b"}},)j"
                "\n"
                R"j({"name":"process_sort_index","ph":"M","pid":1000000001,"tid":0,"args":{"sort_index":1000001}},)j"
                "\n"
                R"j({"name":"cpu_util_simple (percent)","cat":"system","ph":"C","pid":1000000000,"tid":0,"ts":1999999.75,"args":{"value":12.5}},)j"
                "\n"
                R"j({"name":"cpu_util_simple (percent)","cat":"system","ph":"C","pid":1000000000,"tid":0,"ts":2999999.75,"args":{"value":0.1}},)j"
                "\n"
                R"j({"name":"gpu_util (percent) GPU 0 GPU-7f","cat":"system","ph":"C","pid":1000000000,"tid":0,"ts":1999999.75,"args":{"value":99}},)j"
                "\n"
                R"j({"name":"cpu_util_simple (percent)","cat":"system","ph":"C","pid":1000000001,"tid":0,"ts":2499999.75,"args":{"value":50}}]})j"
                "\n"));
}

TEST_F(ExportTest, TraceBucketsCarryMeanMinAndMaxAndLineUpWithATorchBase) {
  std::vector<Point> points;
  for (int i = 0; i < 600; ++i) {
    points.push_back({"node-a", "gpu_util", "GPU-0", kT0 + i * int64_t{1000000}, i == 333 ? 100.0 : 1.0});
  }
  Store(server_->Channel(), 1, "node-a", points);
  const int64_t base_ns = kT0 * 1000;  // the trace starts at the first sample
  const HttpResult trace = Get(absl::StrCat(
      "/api/v1/trials/1/metrics/system/trace?maxPoints=5&baseTimeNanoseconds=", base_ns));
  ASSERT_EQ(trace.status, 200) << trace.body;
  boost::json::value parsed = boost::json::parse(trace.body);
  EXPECT_EQ(parsed.at("baseTimeNanoseconds").as_int64(), base_ns);
  int counters = 0;
  double peak = 0;
  for (const boost::json::value& event : parsed.at("traceEvents").as_array()) {
    const boost::json::object& e = event.as_object();
    for (const char* field : {"name", "ph", "pid", "tid", "args"}) {
      ASSERT_TRUE(e.contains(field)) << field << " missing in " << event;
    }
    if (e.at("ph") != "C") continue;
    ++counters;
    const boost::json::object& args = e.at("args").as_object();
    ASSERT_TRUE(args.contains("mean") && args.contains("min") && args.contains("max")) << event;
    const double ts = e.at("ts").to_number<double>();
    // 599 s in 5 points: buckets of 2 min (of the 1 min rollups) from the
    // base, whose ts are whole multiples of 2 minutes.
    EXPECT_EQ(static_cast<int64_t>(ts) % 120000000, 0) << event;
    if (args.at("max").to_number<double>() > 1) {
      peak = args.at("max").to_number<double>();
      // The spike at 333 s lies in the bucket starting at 240 s.
      EXPECT_EQ(ts, 240e6) << event;
      EXPECT_EQ(args.at("min").to_number<double>(), 1);
    }
  }
  EXPECT_EQ(counters, 5);  // 10 minutes in buckets of 2 minutes
  EXPECT_EQ(peak, 100);
}

// Reads an HTTP response to the end, counting its body's lines, without
// holding it: what a browser's download does.
struct Download {
  int64_t bytes = 0;
  int64_t newlines = 0;
};

absl::StatusOr<Download> DownloadAndCount(int port, const std::string& path) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<uint16_t>(port));
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0) {
    close(fd);
    return absl::UnavailableError("connect");
  }
  // HTTP/1.0: the body comes unchunked and ends with the connection.
  const std::string request = absl::StrCat("GET ", path, " HTTP/1.0\r\n\r\n");
  if (write(fd, request.data(), request.size()) != static_cast<ssize_t>(request.size())) {
    close(fd);
    return absl::UnavailableError("write");
  }
  Download d;
  std::string head;
  bool in_body = false;
  char buffer[1 << 16];
  ssize_t n;
  while ((n = read(fd, buffer, sizeof buffer)) > 0) {
    absl::string_view piece(buffer, n);
    if (!in_body) {
      head.append(piece.data(), piece.size());
      const size_t end = head.find("\r\n\r\n");
      if (end == std::string::npos) continue;
      in_body = true;
      if (!absl::StartsWith(head, "HTTP/1.1 200") && !absl::StartsWith(head, "HTTP/1.0 200")) {
        close(fd);
        return absl::InternalError(head);
      }
      piece = absl::string_view(head).substr(end + 4);
    }
    d.bytes += piece.size();
    d.newlines += std::count(piece.begin(), piece.end(), '\n');
  }
  close(fd);
  return d;
}

// A database failure after the file has started (the export's connection
// terminated while the reader pauses) ends the body without chunked
// encoding's last chunk: a truncated download, never a short one that
// looks whole.
TEST_F(ExportTest, AFailureMidExportEndsTheBodyWithoutItsLastChunk) {
  // About 66 MB of CSV: far more than the sockets between and the export's
  // page hold (at 10 reports a second, a page is a 10-minute window's 6000
  // rows, about 11 MB of CSV).
  auto ingest = v1::IngestService::NewStub(server_->Channel());
  for (int b = 0; b < 36; ++b) {
    v1::ReportSystemMetricsRequest request;
    request.mutable_batch()->set_trial_id(1);
    request.mutable_batch()->set_agent_id("node-a");
    test_util::DeclareRealisticSeries(*request.mutable_batch());
    for (int i = 0; i < 1000; ++i) {
      test_util::AddRealisticReport(*request.mutable_batch(),
                                    absl::FromUnixMicros(kT0 + (b * 1000 + i) * int64_t{100000}),
                                    b * 1000 + i);
    }
    ASSERT_TRUE(
        test_util::ReportWithRetry(*ingest, request, absl::Now() + absl::Seconds(60)).ok());
  }
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<uint16_t>(server_->http_port()));
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof address), 0);
  const std::string request =
      "GET /api/v1/trials/1/metrics/system/export.csv HTTP/1.1\r\nHost: x\r\n\r\n";
  ASSERT_EQ(write(fd, request.data(), request.size()), static_cast<ssize_t>(request.size()));
  std::string received(1 << 16, '\0');
  ssize_t n = read(fd, received.data(), received.size());
  ASSERT_GT(n, 0);
  received.resize(n);
  EXPECT_THAT(received, ::testing::StartsWith("HTTP/1.1 200"));
  // The reader pauses: the export waits on its write, its snapshot open.
  absl::SleepFor(absl::Seconds(1));
  ASSERT_OK_AND_ASSIGN(
      std::string terminated,
      storage::pg::test_util::QueryScalar(
          server_->database_url(),
          "SELECT count(*) FILTER (WHERE pg_terminate_backend(pid)) FROM pg_stat_activity "
          "WHERE datname = current_database() AND state = 'idle in transaction' "
          "AND pid <> pg_backend_pid()"));
  EXPECT_EQ(terminated, "1");
  char buffer[1 << 16];
  while ((n = read(fd, buffer, sizeof buffer)) > 0) received.append(buffer, n);
  close(fd);
  EXPECT_LT(received.size(), 40e6);
  EXPECT_FALSE(absl::EndsWith(received, "\r\n0\r\n\r\n")) << "the body looks whole";
  // The server goes on: the next export is whole.
  const HttpResult again = Get("/api/v1/trials/1/metrics/system/export.csv?end=" +
                               Rfc3339(kT0 + 1000000));
  EXPECT_EQ(again.status, 200);
  EXPECT_EQ(std::count(again.body.begin(), again.body.end(), '\n'),
            1 + 10 * test_util::kRealisticValuesPerReport);
}

TEST(ExportMemoryTest, AMultiMillionValueExportKeepsTheServersMemoryFlat) {
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<test_util::TestDatabase> db,
                       test_util::TestDatabase::Create());
  ASSERT_OK_AND_ASSIGN(test_util::MetricsdProcess metricsd,
                       test_util::StartMetricsd({METRICSD_PATH, "--database-url=" + db->url(),
                                                 "--grpc-address=127.0.0.1:0",
                                                 "--http-address=127.0.0.1:0", "--auth=off"}));
  auto channel = grpc::CreateChannel(metricsd.grpc_target, grpc::InsecureChannelCredentials());
  ASSERT_OK(test_util::CreateTrial(channel, 1));
  // 3 000 000 values: 120 000 reports of 25 (8 GPUs), 10 000 a batch.
  constexpr int kReports = 120000, kPerBatch = 10000;
  auto ingest = v1::IngestService::NewStub(channel);
  for (int b = 0; b < kReports / kPerBatch; ++b) {
    v1::ReportSystemMetricsRequest request;
    request.mutable_batch()->set_trial_id(1);
    request.mutable_batch()->set_agent_id("node-a");
    test_util::DeclareRealisticSeries(*request.mutable_batch());
    for (int i = 0; i < kPerBatch; ++i) {
      const int64_t report = int64_t{b} * kPerBatch + i;
      test_util::AddRealisticReport(*request.mutable_batch(),
                                    absl::FromUnixMicros(kT0 - int64_t{86400} * 1000000 + report * 500000),
                                    report);
    }
    const grpc::Status status =
        test_util::ReportWithRetry(*ingest, request, absl::Now() + absl::Seconds(60));
    ASSERT_TRUE(status.ok()) << status.error_message();
  }
  // The sealer seals these rows as they come (10 000 an agent are past
  // --seal-after-reports), holding up to --seal-memory meanwhile: the
  // export is measured once it is done, on the sealed run it would read in
  // service.
  ASSERT_TRUE(test_util::Eventually(
      [&] {
        return storage::pg::test_util::QueryScalar(
                   db->url(),
                   "SELECT count(*) FROM metrics_profiling WHERE trial_id = 1 "
                   "AND packed_values IS NOT NULL")
                   .value_or("") == "0";
      },
      absl::Seconds(60), absl::Milliseconds(100)));
  const double before_mb = metricsd.process->RssMb();
  std::atomic<bool> done{false};
  double peak_mb = before_mb;
  std::thread sampler([&] {
    while (!done.load()) {
      peak_mb = std::max(peak_mb, metricsd.process->RssMb());
      absl::SleepFor(absl::Milliseconds(20));
    }
  });
  const absl::Time start = absl::Now();
  absl::StatusOr<Download> download =
      DownloadAndCount(metricsd.http_port, "/api/v1/trials/1/metrics/system/export.csv");
  const absl::Duration took = absl::Now() - start;
  done = true;
  sampler.join();
  ASSERT_OK(download.status());
  EXPECT_EQ(download->newlines, 1 + int64_t{kReports} * test_util::kRealisticValuesPerReport);
  std::cout << "exported " << download->newlines - 1 << " values (" << download->bytes / 1e6
            << " MB) in " << took << "; metricsd RSS " << before_mb << " MB before, peak "
            << peak_mb << " MB\n";
  // The file is some 200 MB; the server holds a page of rows and a chunk.
  EXPECT_GT(download->bytes, 150e6);
  if (const char* sanitizer = std::getenv("METRICS_SANITIZER"); sanitizer != nullptr) {
    // AddressSanitizer keeps freed memory in quarantine (256 MB), so RSS
    // grows with what was allocated, not with what is held.
    std::cout << "RSS not checked under " << sanitizer << "\n";
    return;
  }
  EXPECT_LT(peak_mb - before_mb, 40) << "metricsd's memory grew with the export";
}

}  // namespace
}  // namespace metrics
