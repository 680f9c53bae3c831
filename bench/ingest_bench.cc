// The ingest benchmark (docs/benchmarks.md). Starts metricsd on a
// throwaway database (run it under pg_virtualenv: bench/ingest.sh) and
// measures, in one run:
//   1. bulk throughput: a few streams send realistic reports (9 host series
//      + 2 per GPU x 8 GPUs = 25 values) as fast as acknowledgements allow;
//      values per second from first send to last acknowledgement, so every
//      value counted is committed with its registry and stream position;
//   2. the ceiling, measured first: the same rows COPYed straight into the
//      same (then emptied) partition from one session, and the ratio;
//   1b. security's cost: the same bulk run against fresh metricsd
//      processes on fresh databases, plain and with tokens required and TLS
//      (the streams presenting a reporter token), twice in turn;
//      secure_ratio is the best secure throughput over the best plain;
//   1c. two metricsd processes on one database against one: the same bulk
//      run on fresh databases, in turn, twice; two_process_ratio is best
//      over best, and every value must be stored once;
//   3. fan-in: N streams each sending one report a second, for growing N;
//      the acknowledgement latency (send to ack received) and the server's
//      resident memory at each N; then the largest N that held again, with
//      a second metricsd on the same database taking half the connections;
//   4. the start storm: --storm_agents streams opened at once on a freshly
//      started metricsd, each registering its 25 series, measured from the
//      first second: the p99 of each second, the seconds until every later
//      second's p99 is under 1 s, and the peak RSS.
// Prints a table, then one JSON object as the last line.
#include <grpcpp/create_channel.h>
#include <grpcpp/support/client_callback.h>

#include <signal.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <thread>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "bench/cpu_time.h"
#include "bench/fan_in_stream.h"
#include "common/grpc_status.h"
#include "common/status_macros.h"
#include "common/subprocess.h"
#include "common/tls_files.h"
#include "proto/metrics/v1/ingest.grpc.pb.h"
#include "proto/metrics/v1/trials.grpc.pb.h"
#include "server/services/proto_convert.h"
#include "storage/format/packed_report.h"
#include "storage/pg/pg_token_store.h"
#include "storage/pg/testing/pg_checks.h"
#include "tests/testing/metricsd_process.h"
#include "tests/testing/realistic_batch.h"
#include "tests/testing/resending_streamer.h"
#include "tests/testing/test_certificates.h"
#include "tests/testing/test_database.h"

ABSL_FLAG(int, bulk_streams, 4, "Streams (agents) sending in the bulk run.");
ABSL_FLAG(int, bulk_reports, 200000, "Reports sent in the bulk run, in all.");
ABSL_FLAG(int, batch_reports, 200, "Reports per batch in the bulk run.");
ABSL_FLAG(std::string, fanin_steps, "250,500,1000,1500,2000",
          "Stream counts of the fan-in run.");
ABSL_FLAG(int, fanin_seconds, 10, "Measured seconds per fan-in step.");
// Without a warm-up, the first two measured seconds of 5000 agents carry
// the step's opening (p99 246-264 ms, then 11): 10 s leaves it well behind.
ABSL_FLAG(int, warmup_seconds, 10, "Unmeasured seconds before each step.");
ABSL_FLAG(int, storm_agents, 5000,
          "Agents of the start storm: all open their streams in the same second "
          "on a freshly started metricsd (0: no storm).");
ABSL_FLAG(int, storm_seconds, 20, "Measured seconds of the start storm, from its first.");
ABSL_FLAG(std::string, metricsd, METRICSD_PATH,
          "The metricsd binary to measure (default: this build's); another "
          "build's, to alternate builds with one benchmark.");

namespace metrics::bench {
namespace {

using storage::pg::test_util::RawRow;
using test_util::AddRealisticReport;
using test_util::DeclareRealisticSeries;
using test_util::ResendingStreamer;
using test_util::StreamerOptions;
using common::Subprocess;
using test_util::TestDatabase;

// The raw row the server stores for a report (the same packed values; the
// series' registry ids stand in as their indexes + 1).
RawRow RowOf(const v1::SystemMetricsBatch& proto, int report) {
  const storage::MetricBatch batch = server::BatchFromProto(proto);
  const storage::Report& r = batch.reports[report];
  std::vector<storage::SeriesValue> values;
  for (size_t v = 0; v < r.values.size(); ++v) {
    values.emplace_back(int64_t{r.series[v]} + 1, r.values[v]);
  }
  std::sort(values.begin(), values.end());
  return {batch.agent_id, r.time_us, storage::PackReport(values)};
}

double Percentile(std::vector<double> values, double p) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const size_t index = std::min(values.size() - 1,
                                static_cast<size_t>(p * values.size()));
  return values[index];
}

// Acknowledgement latencies of the measured part of a fan-in step, also by
// the second their report was sent in: whether a step never catches up
// after its start or falls behind now and then shows there.
class Recorder {
 public:
  void Enable() {
    absl::MutexLock lock(&mu_);
    enabled_ = true;
    enabled_at_ = absl::Now();
  }
  void Record(absl::Time sent, double ms) {
    absl::MutexLock lock(&mu_);
    if (!enabled_) return;
    ms_.push_back(ms);
    const auto second = static_cast<size_t>(
        std::max<int64_t>(0, absl::ToInt64Seconds(sent - enabled_at_)));
    if (by_second_.size() <= second) by_second_.resize(second + 1);
    by_second_[second].push_back(ms);
  }
  // The p99 of the reports sent in each measured second.
  std::vector<double> P99BySecond() {
    absl::MutexLock lock(&mu_);
    std::vector<double> p99;
    for (const std::vector<double>& ms : by_second_) {
      p99.push_back(Percentile(ms, 0.99));
    }
    return p99;
  }
  size_t Count() {
    absl::MutexLock lock(&mu_);
    return ms_.size();
  }
  std::vector<double> Take() {
    absl::MutexLock lock(&mu_);
    return std::move(ms_);
  }

 private:
  absl::Mutex mu_;
  bool enabled_ ABSL_GUARDED_BY(mu_) = false;
  absl::Time enabled_at_ ABSL_GUARDED_BY(mu_);
  std::vector<double> ms_ ABSL_GUARDED_BY(mu_);
  std::vector<std::vector<double>> by_second_ ABSL_GUARDED_BY(mu_);
};

struct FanInResult {
  int streams = 0;
  size_t acks = 0;
  double p50_ms = 0, p99_ms = 0, max_ms = 0;
  std::vector<double> p99_ms_by_second;  // by the second of sending
  int failed = 0;  // streams that failed, or had a batch refused
  int64_t skipped = 0;
  int64_t rejected = 0;
  double rss_mb = 0;
  // CPU per report acknowledged in the measured seconds, in microseconds:
  // steadier than the latencies on a shared machine, and what decides
  // whether a step keeps up once the machine is busy.
  double cpu_us_metricsd = 0, cpu_us_postgres = 0, cpu_us_client = 0;
};

// Fan-in agents belong to trials of this many, as multi-host jobs would: a
// single trial of thousands of agents would pass --max-series-per-trial.
constexpr int kFanInAgentsPerTrial = 10;

// The trial of fan-in agent `i` of step `step`.
int32_t FanInTrial(int step, int i) {
  return 1000 * (step + 1) + i / kFanInAgentsPerTrial;
}

// Registers the trials of a fan-in step of `streams` agents.
absl::Status CreateFanInTrials(const std::string& target, int step,
                               int streams) {
  auto trials = v1::TrialService::NewStub(
      grpc::CreateChannel(target, grpc::InsecureChannelCredentials()));
  for (int i = 0; i < streams; i += kFanInAgentsPerTrial) {
    grpc::ClientContext context;
    v1::CreateTrialRequest request;
    request.set_id(FanInTrial(step, i));
    v1::Trial trial;
    RETURN_IF_ERROR(common::FromGrpcStatus(
        trials->CreateTrial(&context, request, &trial)));
  }
  return absl::OkStatus();
}

// How a fan-in step runs: agents opened a few hundred at a time and a
// warm-up before the measured seconds (the steady state), or a start storm,
// every agent opened at once and measured from its first second.
struct FanInShape {
  bool storm = false;
  int warmup_seconds = 0;
  int measured_seconds = 0;
};

FanInShape SteadyShape() {
  return {false, absl::GetFlag(FLAGS_warmup_seconds), absl::GetFlag(FLAGS_fanin_seconds)};
}

// The machine's load averages over 1, 5 and 15 minutes (/proc/loadavg),
// printed beside the figures they disturb.
std::string LoadAverages() {
  std::ifstream in("/proc/loadavg");
  std::string one, five, fifteen;
  if (!(in >> one >> five >> fifteen)) return "unknown";
  return absl::StrCat(one, " ", five, " ", fifteen);
}

// The seconds from a storm's start until every later second's reports were
// acknowledged at p99 under 1 s; -1 when that never came.
int DrainedAfterSeconds(const std::vector<double>& p99_ms_by_second) {
  int drained = -1;
  for (int s = static_cast<int>(p99_ms_by_second.size()) - 1; s >= 0; --s) {
    if (p99_ms_by_second[s] >= 1000) break;
    drained = s;
  }
  return drained;
}

// The streams' connections alternate between `targets`; the RSS is that of
// all `servers` together.
FanInResult RunFanIn(const std::vector<std::string>& targets,
                     const std::vector<const Subprocess*>& servers,
                     pid_t postmaster, int streams, int step,
                     const FanInShape& shape) {
  FanInResult result;
  result.streams = streams;
  if (absl::Status created = CreateFanInTrials(targets[0], step, streams);
      !created.ok()) {
    std::fprintf(stderr, "bench: fan-in trials: %s\n",
                 created.ToString().c_str());
    result.failed = streams;
    return result;
  }
  Recorder recorder;
  // Several connections, as many agents on many hosts would have.
  std::vector<std::unique_ptr<v1::IngestService::Stub>> stubs;
  for (int c = 0; c < std::max(1, streams / 100); ++c) {
    grpc::ChannelArguments args;
    args.SetInt("metrics.bench.connection", c);
    stubs.push_back(v1::IngestService::NewStub(grpc::CreateCustomChannel(
        targets[c % targets.size()], grpc::InsecureChannelCredentials(), args)));
  }
  std::atomic<bool> sampling{true};
  std::atomic<double> rss{0};
  std::thread sampler([&] {
    while (sampling) {
      double sum = 0;
      for (const Subprocess* server : servers) sum += server->RssMb();
      rss = std::max(rss.load(), sum);
      absl::SleepFor(absl::Milliseconds(200));
    }
  });
  std::vector<std::unique_ptr<FanInStream>> agents;
  for (int i = 0; i < streams; ++i) {
    agents.push_back(std::make_unique<FanInStream>(
        stubs[i % stubs.size()].get(), FanInTrial(step, i),
        absl::StrCat("fanin-", step, "-", i),
        [&recorder](absl::Time sent, double ms) { recorder.Record(sent, ms); }));
    if (!shape.storm && i % 200 == 199) absl::SleepFor(absl::Milliseconds(100));
  }
  // Each stream sends once a second, spread evenly over the second.
  const int total = shape.warmup_seconds + shape.measured_seconds;
  std::vector<pid_t> pids;
  for (const Subprocess* server : servers) pids.push_back(server->pid());
  CpuUse cpu_before;
  const absl::Time start = absl::Now();
  constexpr int kTicks = 100;
  for (int second = 0; second < total; ++second) {
    if (second == shape.warmup_seconds) {
      recorder.Enable();
      cpu_before = CpuUse::Now(postmaster, pids);
    }
    for (int tick = 0; tick < kTicks; ++tick) {
      for (int i = tick; i < streams; i += kTicks) agents[i]->SendOne();
      const absl::Time next =
          start + absl::Seconds(second) + absl::Milliseconds(10 * (tick + 1));
      absl::SleepFor(next - absl::Now());
    }
  }
  const CpuUse cpu = CpuUse::Now(postmaster, pids) - cpu_before;
  if (const size_t acked = recorder.Count(); acked > 0) {
    result.cpu_us_metricsd = 1e6 * cpu.metricsd / acked;
    result.cpu_us_postgres = 1e6 * cpu.postgres / acked;
    result.cpu_us_client = 1e6 * cpu.client / acked;
  }
  absl::SleepFor(absl::Seconds(2));  // let the last acknowledgements arrive
  for (auto& a : agents) a->Close();
  for (auto& a : agents) {
    if (!a->WaitDone(absl::Seconds(30))) {
      // Not finished: cancel it, and wait for OnDone before it is freed.
      a->Cancel();
      a->WaitDone(absl::InfiniteDuration());
      if (result.failed++ == 0) {
        std::fprintf(stderr, "bench: a fan-in stream did not end in 30 s\n");
      }
    } else if (!a->status().ok()) {
      if (result.failed++ == 0) {
        std::fprintf(stderr, "bench: a fan-in stream ended with code %d: %s\n",
                     static_cast<int>(a->status().error_code()),
                     a->status().error_message().c_str());
      }
    } else if (a->rejected() > 0) {
      if (result.failed++ == 0) {
        std::fprintf(stderr, "bench: a fan-in batch was refused: %s\n",
                     a->first_rejection().c_str());
      }
    }
    result.skipped += a->skipped();
    result.rejected += a->rejected();
  }
  sampling = false;
  sampler.join();
  result.p99_ms_by_second = recorder.P99BySecond();
  std::vector<double> ms = recorder.Take();
  result.acks = ms.size();
  result.p50_ms = Percentile(ms, 0.50);
  result.p99_ms = Percentile(ms, 0.99);
  result.max_ms = ms.empty() ? 0 : *std::max_element(ms.begin(), ms.end());
  result.rss_mb = rss;
  return result;
}

// One row of the fan-in table, `note` after it.
void PrintFanInRow(const FanInResult& r, const char* note = "") {
  std::printf("  %8d %8zu %9.1f %9.1f %9.1f %7d %8lld %8lld %9.1f  %.0f %.0f %.0f%s\n", r.streams,
              r.acks, r.p50_ms, r.p99_ms, r.max_ms, r.failed, static_cast<long long>(r.rejected),
              static_cast<long long>(r.skipped), r.rss_mb, r.cpu_us_metricsd, r.cpu_us_postgres,
              r.cpu_us_client, note);
}

struct BulkResult {
  absl::Duration took;
  int failures = 0;
};

// Sends each stream's batches (trial 1) on its own thread, as fast as
// acknowledgements allow, stream s to targets[s % targets.size()]; the time
// is from the first send to the last acknowledgement. The batches are lent:
// the caller frees them after its clock and CPU reading, as it does the
// COPY's rows. Built and freed by the bench, they are neither side's work;
// freed by the four senders at once, in the clock, they had cost about two
// thirds of the client's CPU (docs/benchmarks.md, "Measuring fairly").
BulkResult RunBulk(const std::vector<std::string>& targets,
                   std::vector<std::vector<v1::SystemMetricsBatch>>& work,
                   const StreamerOptions& base) {
  const absl::Time start = absl::Now();
  std::vector<std::thread> senders;
  std::atomic<int> failures{0};
  for (size_t s = 0; s < work.size(); ++s) {
    senders.emplace_back([&, s] {
      StreamerOptions options = base;
      options.stream_id = absl::StrCat("bulk-", s);
      options.trial_id = 1;
      options.window = 16;
      options.timeout = absl::Minutes(10);
      const std::string& target = targets[s % targets.size()];
      ResendingStreamer streamer([&] { return target; }, options);
      if (!streamer.Send(work[s]).ok()) ++failures;
    });
  }
  for (auto& t : senders) t.join();
  return {absl::Now() - start, failures.load()};
}

struct FreshBulkResult {
  BulkResult run;
  CpuUse run_cpu;
  absl::Duration copy_took;  // with `copy_first` only
  CpuUse copy_cpu;
  int64_t stored = -1;       // values in the database afterwards
  int64_t repeated = -1;     // reports stored twice
};

// The bulk run against a metricsd of its own on a fresh database. With
// `secure`, tokens are required (metricsd's default) and it serves TLS (a
// certificate made by openssl now), and the streams present a reporter
// token of trial 1; without, --auth=off and plaintext. With `copy_first`,
// the same rows are first COPYed into that database (and removed), so the
// pair's ratio is measured in one stretch of the machine's weather. Each
// measures its CPU cost too (CpuUse, `postmaster`'s cluster). With
// `processes` 2, two metricsd serve the database, the streams alternating.
absl::StatusOr<FreshBulkResult> RunFreshBulk(
    std::vector<std::vector<v1::SystemMetricsBatch>> work, bool secure,
    const std::vector<RawRow>* copy_first, pid_t postmaster,
    int processes = 1) {
  ASSIGN_OR_RETURN(std::unique_ptr<TestDatabase> db, TestDatabase::Create());
  FreshBulkResult result;
  if (copy_first != nullptr) {
    const CpuUse cpu_before = CpuUse::Now(postmaster, {});
    ASSIGN_OR_RETURN(result.copy_took,
                     storage::pg::test_util::CopyRawRows(db->url(), 2, *copy_first));
    result.copy_cpu = CpuUse::Now(postmaster, {}) - cpu_before;
    RETURN_IF_ERROR(storage::pg::test_util::TruncateProfilingRows(db->url()));
  }
  char dir_template[] = "/tmp/ingest-bench-pki-XXXXXX";
  if (::mkdtemp(dir_template) == nullptr) {
    return absl::InternalError("mkdtemp failed");
  }
  const std::string dir = dir_template;
  absl::StatusOr<test_util::TestCertificates> certs =
      test_util::CreateTestCertificates(dir);
  if (!certs.ok()) return certs.status();
  std::vector<std::string> argv = {absl::GetFlag(FLAGS_metricsd), "--database-url=" + db->url(),
                                   "--grpc-address=127.0.0.1:0",
                                   "--http-address=127.0.0.1:0"};
  if (secure) {
    argv.push_back("--tls-cert=" + certs->server_cert);
    argv.push_back("--tls-key=" + certs->server_key);
  } else {
    argv.push_back("--auth=off");
  }
  std::vector<std::unique_ptr<Subprocess>> servers;
  std::vector<std::string> targets;
  std::vector<pid_t> pids;
  for (int i = 0; i < processes; ++i) {
    ASSIGN_OR_RETURN(std::unique_ptr<Subprocess> metricsd, Subprocess::Start(argv));
    ASSIGN_OR_RETURN(std::string line,
                     metricsd->WaitForLine("gRPC listening on", absl::Seconds(30)));
    const std::string port = line.substr(line.rfind(':') + 1);
    targets.push_back(absl::StrCat("localhost:", port.substr(0, port.find(' '))));
    pids.push_back(metricsd->pid());
    servers.push_back(std::move(metricsd));
  }
  const std::string& target = targets[0];

  storage::pg::PgTokenStore tokens(db->url());
  storage::TokenRequest admin_request;
  admin_request.role = storage::TokenRole::kAdmin;
  ASSIGN_OR_RETURN(storage::CreatedToken admin,
                   tokens.Create(admin_request, absl::Now() + absl::Seconds(30)));
  std::shared_ptr<grpc::ChannelCredentials> credentials =
      grpc::InsecureChannelCredentials();
  if (secure) {
    ASSIGN_OR_RETURN(credentials,
                     common::GrpcChannelCredentials({certs->ca, "", ""}));
  }
  {
    auto trials = v1::TrialService::NewStub(
        grpc::CreateChannel(target, credentials));
    grpc::ClientContext context;
    context.AddMetadata("authorization", "Bearer " + admin.secret);
    v1::CreateTrialRequest request;
    request.set_id(1);
    v1::Trial trial;
    RETURN_IF_ERROR(common::FromGrpcStatus(
        trials->CreateTrial(&context, request, &trial)));
  }
  storage::TokenRequest reporter_request;
  reporter_request.role = storage::TokenRole::kReporter;
  reporter_request.trial_id = 1;
  ASSIGN_OR_RETURN(
      storage::CreatedToken reporter,
      tokens.Create(reporter_request, absl::Now() + absl::Seconds(30)));

  StreamerOptions options;
  options.credentials = credentials;
  if (secure) options.token = reporter.secret;
  const CpuUse cpu_before = CpuUse::Now(postmaster, pids);
  result.run = RunBulk(targets, work, options);
  result.run_cpu = CpuUse::Now(postmaster, pids) - cpu_before;
  for (auto& server : servers) server->Signal(SIGTERM);
  for (auto& server : servers) (void)server->Wait(absl::Seconds(60));
  result.stored = storage::pg::test_util::CountRawValues(db->url(), 1).value_or(-1);
  result.repeated =
      storage::pg::test_util::CountRepeatedReports(db->url(), 1).value_or(-1);
  std::error_code ignored;
  std::filesystem::remove_all(dir, ignored);
  return result;
}

int Run() {
  absl::StatusOr<std::unique_ptr<TestDatabase>> db = TestDatabase::Create();
  if (!db.ok()) {
    std::fprintf(stderr, "bench: %s\n", db.status().ToString().c_str());
    return 1;
  }
  absl::StatusOr<std::unique_ptr<Subprocess>> metricsd =
      Subprocess::Start({absl::GetFlag(FLAGS_metricsd), "--database-url=" + (*db)->url(),
                         "--grpc-address=127.0.0.1:0",
                         "--http-address=127.0.0.1:0", "--auth=off"});
  absl::StatusOr<std::string> line =
      metricsd.ok() ? (*metricsd)->WaitForLine("gRPC listening on",
                                               absl::Seconds(30))
                    : metricsd.status();
  if (!line.ok()) {
    std::fprintf(stderr, "bench: metricsd: %s\n", line.status().ToString().c_str());
    return 1;
  }
  const std::string target =
      absl::StrCat("127.0.0.1:", line->substr(line->rfind(':') + 1));
  auto trials = v1::TrialService::NewStub(
      grpc::CreateChannel(target, grpc::InsecureChannelCredentials()));
  {
    grpc::ClientContext context;
    v1::CreateTrialRequest request;
    request.set_id(1);
    v1::Trial trial;
    if (grpc::Status created = trials->CreateTrial(&context, request, &trial);
        !created.ok()) {
      std::fprintf(stderr, "bench: CreateTrial 1: %s\n",
                   created.error_message().c_str());
      return 1;
    }
  }

  // 1. Bulk.
  const int streams = absl::GetFlag(FLAGS_bulk_streams);
  const int per_batch = absl::GetFlag(FLAGS_batch_reports);
  const int batches_per_stream =
      absl::GetFlag(FLAGS_bulk_reports) / streams / per_batch;
  const absl::Time history = absl::Now() - absl::Hours(24 * 30);
  std::vector<std::vector<v1::SystemMetricsBatch>> work(streams);
  std::vector<RawRow> rows;
  for (int s = 0; s < streams; ++s) {
    for (int b = 0; b < batches_per_stream; ++b) {
      v1::SystemMetricsBatch batch;
      batch.set_trial_id(1);
      batch.set_agent_id(absl::StrCat("bulk-", s));
      DeclareRealisticSeries(batch);
      for (int r = 0; r < per_batch; ++r) {
        AddRealisticReport(batch, history + absl::Seconds(b * per_batch + r),
                           b * per_batch + r);
        rows.push_back(RowOf(batch, r));
      }
      work[s].push_back(std::move(batch));
    }
  }
  const int64_t values =
      static_cast<int64_t>(rows.size()) * test_util::kRealisticValuesPerReport;

  // The cluster all the databases live in, for its CPU time. (Not the
  // parent of the backend that answers a query: that backend exits when
  // its connection closes, and was sometimes gone before it was looked up.)
  absl::StatusOr<std::string> data_directory = storage::pg::test_util::QueryScalar(
      (*db)->url(), "SELECT current_setting('data_directory')");
  const pid_t postmaster = data_directory.ok() ? PostmasterPid(*data_directory) : 0;
  if (postmaster == 0) {
    std::fprintf(stderr, "bench: cannot find PostgreSQL's postmaster (is it on this machine?)\n");
    return 1;
  }

  // The ceiling first: the same rows COPYed into the empty partition from
  // one session. Then the partition is emptied again, so the ingest starts
  // from the same state.
  const CpuUse copy_cpu_before = CpuUse::Now(postmaster, {});
  absl::StatusOr<absl::Duration> copy =
      storage::pg::test_util::CopyRawRows((*db)->url(), 2, rows);
  if (!copy.ok()) {
    std::fprintf(stderr, "bench: %s\n", copy.status().ToString().c_str());
    return 1;
  }
  const CpuUse copy_cpu = CpuUse::Now(postmaster, {}) - copy_cpu_before;
  const double copy_per_s = values / absl::ToDoubleSeconds(*copy);
  if (absl::Status emptied =
          storage::pg::test_util::TruncateProfilingRows((*db)->url());
      !emptied.ok()) {
    std::fprintf(stderr, "bench: %s\n", emptied.ToString().c_str());
    return 1;
  }

  const CpuUse cpu_before = CpuUse::Now(postmaster, {(*metricsd)->pid()});
  const BulkResult plain = RunBulk({target}, work, {});
  const CpuUse cpu = CpuUse::Now(postmaster, {(*metricsd)->pid()}) - cpu_before;
  const double samples_per_s = values / absl::ToDoubleSeconds(plain.took);
  absl::StatusOr<int64_t> stored = storage::pg::test_util::CountRawValues((*db)->url(), 1);

  std::printf("bulk ingest: %d streams x %d batches x %d reports x 25 values\n",
              streams, batches_per_stream, per_batch);
  std::printf("  %-34s %12.0f values/s  (%.2f s, %lld values, %lld stored%s)\n",
              "metricsd (gRPC, committed)", samples_per_s,
              absl::ToDoubleSeconds(plain.took), static_cast<long long>(values),
              static_cast<long long>(stored.ok() ? *stored : -1),
              plain.failures > 0 ? ", FAILURES" : "");
  std::printf("  %-34s %12.0f values/s  (%.2f s)\n",
              "COPY of the same rows, one session", copy_per_s,
              absl::ToDoubleSeconds(*copy));
  std::printf("  %-34s %12.2f\n", "ratio of this pair",
              samples_per_s / copy_per_s);

  // 1b. Security's cost: the same bulk run, plain and then with tokens and
  // TLS, each against a metricsd of its own on a fresh database (the same
  // starting state; the main run's database has grown), twice in turn;
  // the best of each counts. Each plain run follows a COPY of its own, and
  // `ratio_to_copy` is the median of the three pairs (the main run's and
  // these two): on this shared machine one COPY alone moved between 2.5
  // and 4.8 million values/s within an hour, and a pair measured close
  // together sees the same weather.
  // The CPU each side of a pair used gives a second, steadier ratio: of
  // the machine's cost per value. It also tells the throughputs' ratio
  // apart from how many cores each side keeps busy (one COPY session about
  // one; metricsd all it gets).
  struct Pair {
    double per_s, copy_per_s;  // values/s
    CpuUse cpu, copy_cpu;
    double Ratio() const { return per_s / copy_per_s; }
    double CpuRatio() const { return copy_cpu.Total() / cpu.Total(); }
  };
  std::vector<Pair> pairs = {{samples_per_s, copy_per_s, cpu, copy_cpu}};
  double fresh_plain_per_s = 0, secure_per_s = 0;
  int secure_failures = 0;
  for (int round = 0; round < 2; ++round) {
    for (bool secure : {false, true}) {
      absl::StatusOr<FreshBulkResult> r =
          RunFreshBulk(work, secure, secure ? nullptr : &rows, postmaster);
      if (!r.ok()) {
        std::fprintf(stderr, "bench: %s run: %s\n",
                     secure ? "secure" : "plain", r.status().ToString().c_str());
        return 1;
      }
      const double per_s = values / absl::ToDoubleSeconds(r->run.took);
      if (!secure) {
        const double copy_pair = values / absl::ToDoubleSeconds(r->copy_took);
        std::printf("  %-34s %12.0f values/s  (%.2f s)\n",
                    "COPY into a fresh database", copy_pair,
                    absl::ToDoubleSeconds(r->copy_took));
        pairs.push_back({per_s, copy_pair, r->run_cpu, r->copy_cpu});
      }
      std::printf("  %-34s %12.0f values/s  (%.2f s%s)\n",
                  secure ? "fresh metricsd, token + TLS"
                         : "fresh metricsd, plain",
                  per_s, absl::ToDoubleSeconds(r->run.took),
                  r->run.failures > 0 ? ", FAILURES" : "");
      double& best = secure ? secure_per_s : fresh_plain_per_s;
      best = std::max(best, per_s);
      secure_failures += r->run.failures;
    }
  }
  std::printf("  %-34s %12.2f\n", "secure_ratio (best to best)",
              secure_per_s / fresh_plain_per_s);

  // 1c. Two metricsd processes on one database against one, in turn, twice
  // (plain, fresh databases, the streams alternating between the two); the
  // best of each counts. Every value must be stored once.
  double one_per_s = 0, two_per_s = 0;
  bool two_exact = true;
  for (int round = 0; round < 2; ++round) {
    for (int processes : {1, 2}) {
      absl::StatusOr<FreshBulkResult> r =
          RunFreshBulk(work, false, nullptr, postmaster, processes);
      if (!r.ok()) {
        std::fprintf(stderr, "bench: %d-process run: %s\n", processes,
                     r.status().ToString().c_str());
        return 1;
      }
      const double per_s = values / absl::ToDoubleSeconds(r->run.took);
      const bool exact = r->run.failures == 0 && r->stored == values && r->repeated == 0;
      std::printf("  %-34s %12.0f values/s  (%.2f s, %lld stored, %lld twice)\n",
                  processes == 1 ? "one metricsd" : "two metricsd, one database",
                  per_s, absl::ToDoubleSeconds(r->run.took),
                  static_cast<long long>(r->stored), static_cast<long long>(r->repeated));
      double& best = processes == 1 ? one_per_s : two_per_s;
      best = std::max(best, per_s);
      if (processes == 2) two_exact = two_exact && exact;
      secure_failures += r->run.failures;
    }
  }
  std::printf("  %-34s %12.2f%s\n", "two_process_ratio (best to best)",
              two_per_s / one_per_s, two_exact ? "" : "  (NOT EXACT)");
  std::printf("  %-34s", "ratio_to_copy of each pair");
  for (const Pair& p : pairs) std::printf(" %.2f", p.Ratio());
  std::printf("\n  %-34s", "CPU s, metricsd / COPY, each pair");
  for (const Pair& p : pairs) {
    std::printf(" %.2f/%.2f", p.cpu.Total(), p.copy_cpu.Total());
  }
  std::printf("\n  %-34s", "of which PostgreSQL");
  for (const Pair& p : pairs) {
    std::printf(" %.2f/%.2f", p.cpu.postgres, p.copy_cpu.postgres);
  }
  std::printf("\n  %-34s", "of which the client");
  for (const Pair& p : pairs) {
    std::printf(" %.2f/%.2f", p.cpu.client, p.copy_cpu.client);
  }
  std::printf("\n  %-34s", "of which metricsd");
  for (const Pair& p : pairs) std::printf(" %.2f", p.cpu.metricsd);
  std::printf("\n  %-34s", "cpu_ratio_to_copy of each pair");
  std::vector<double> cpu_ratios;
  for (const Pair& p : pairs) {
    std::printf(" %.2f", p.CpuRatio());
    cpu_ratios.push_back(p.CpuRatio());
  }
  std::sort(cpu_ratios.begin(), cpu_ratios.end());
  const double cpu_ratio = cpu_ratios[cpu_ratios.size() / 2];
  std::sort(pairs.begin(), pairs.end(), [](const Pair& a, const Pair& b) {
    return a.Ratio() < b.Ratio();
  });
  const Pair& median = pairs[pairs.size() / 2];
  std::printf("\n  %-34s %12.2f\n", "ratio_to_copy (median pair)",
              median.Ratio());
  std::printf("  %-34s %12.2f\n\n", "cpu_ratio_to_copy (median)", cpu_ratio);

  // 3. Fan-in.
  std::printf("fan-in: each stream sends 1 report (25 values) per second (load %s)\n",
              LoadAverages().c_str());
  std::printf("  %8s %8s %9s %9s %9s %7s %8s %8s %9s  %s\n", "streams", "acks",
              "p50 ms", "p99 ms", "max ms", "failed", "refused", "skipped",
              "rss MB", "CPU us/report: metricsd pg client");
  int best = 0;
  double best_p99 = 0, peak_rss = 0;
  int step = 0;
  // Each step starts settled. The bulk runs' rows, and each step's, make
  // autovacuum due (an insert-only table is vacuumed every 20 % of its
  // growth); a pass of a few seconds during the 5000-stream step, on these
  // 2 busy cores, made it fall behind (docs/benchmarks.md, "Measuring
  // fairly").
  // Where a pass fell was luck; the steps measure the fan-in alone.
  const auto settle = [&db] {
    const absl::Status vacuumed = storage::pg::test_util::VacuumAnalyze((*db)->url());
    if (!vacuumed.ok()) {
      std::fprintf(stderr, "bench: %s\n", vacuumed.ToString().c_str());
    }
    return vacuumed.ok();
  };
  for (absl::string_view text :
       absl::StrSplit(absl::GetFlag(FLAGS_fanin_steps), ',')) {
    int n = 0;
    if (!absl::SimpleAtoi(text, &n)) continue;
    if (!settle()) return 1;
    FanInResult r =
        RunFanIn({target}, {metricsd->get()}, postmaster, n, step++, SteadyShape());
    PrintFanInRow(r);
    std::printf("  %8s p99 ms of the reports sent in each measured second:", "");
    for (double p99 : r.p99_ms_by_second) std::printf(" %.0f", p99);
    std::printf("\n");
    std::fflush(stdout);
    peak_rss = std::max(peak_rss, r.rss_mb);
    if (r.p99_ms < 1000 && r.failed == 0 && r.acks > 0) {
      best = n;
      best_p99 = r.p99_ms;
    } else {
      break;
    }
  }
  // The same step again with a second metricsd on the same database, the
  // connections alternating: latency, and memory of both together.
  FanInResult two;
  if (best > 0) {
    absl::StatusOr<test_util::MetricsdProcess> second = test_util::StartMetricsd(
        {absl::GetFlag(FLAGS_metricsd), "--database-url=" + (*db)->url(), "--grpc-address=127.0.0.1:0",
         "--http-address=127.0.0.1:0", "--auth=off"});
    if (!second.ok()) {
      std::fprintf(stderr, "bench: second metricsd: %s\n",
                   second.status().ToString().c_str());
      return 1;
    }
    if (!settle()) return 1;
    two = RunFanIn({target, second->grpc_target},
                   {metricsd->get(), second->process.get()}, postmaster, best,
                   step++, SteadyShape());
    PrintFanInRow(two, "  (two metricsd: RSS and CPU of both)");
    second->process->Signal(SIGTERM);
    (void)second->process->Wait(absl::Seconds(60));
  }
  (*metricsd)->Signal(SIGTERM);
  (void)(*metricsd)->Wait(absl::Seconds(60));

  // 6. The start storm: a fleet reconnecting at once to a metricsd just
  // started (after an upgrade or an outage), every agent declaring its
  // series in the same second.
  FanInResult storm;
  int storm_drained = -1;
  double storm_worst_p99 = 0;
  if (const int n = absl::GetFlag(FLAGS_storm_agents); n > 0) {
    absl::StatusOr<test_util::MetricsdProcess> fresh = test_util::StartMetricsd(
        {absl::GetFlag(FLAGS_metricsd), "--database-url=" + (*db)->url(), "--grpc-address=127.0.0.1:0",
         "--http-address=127.0.0.1:0", "--auth=off"});
    if (!fresh.ok()) {
      std::fprintf(stderr, "bench: storm metricsd: %s\n", fresh.status().ToString().c_str());
      return 1;
    }
    if (!settle()) return 1;
    storm = RunFanIn({fresh->grpc_target}, {fresh->process.get()}, postmaster, n, step++,
                     {true, 0, absl::GetFlag(FLAGS_storm_seconds)});
    storm_drained = DrainedAfterSeconds(storm.p99_ms_by_second);
    for (double p99 : storm.p99_ms_by_second) storm_worst_p99 = std::max(storm_worst_p99, p99);
    std::printf("\nstart storm: %d agents open their streams at once on a fresh metricsd "
                "(%d series registered; load %s)\n",
                n, n * test_util::kRealisticValuesPerReport, LoadAverages().c_str());
    PrintFanInRow(storm);
    std::printf("  %8s p99 ms of the reports sent in each second:", "");
    for (double p99 : storm.p99_ms_by_second) std::printf(" %.0f", p99);
    std::printf("\n  %8s worst second's p99 %.0f ms; drained (every later second's p99 < 1 s) after: ",
                "", storm_worst_p99);
    if (storm_drained >= 0) {
      std::printf("%d s\n", storm_drained);
    } else {
      std::printf("not within %d s\n", absl::GetFlag(FLAGS_storm_seconds));
    }
    fresh->process->Signal(SIGTERM);
    (void)fresh->process->Wait(absl::Seconds(60));
  }

  std::printf(
      "{\"samples_per_s\": %.0f, \"copy_samples_per_s\": %.0f, "
      "\"ratio_to_copy\": %.3f, \"fanin_streams\": %d, \"p99_ack_ms\": %.1f, "
      "\"server_peak_rss_mb\": %.1f, \"secure_samples_per_s\": %.0f, "
      "\"secure_ratio\": %.3f, \"cpu_ratio_to_copy\": %.3f, "
      "\"two_process_ratio\": %.3f, \"two_process_fanin_p99_ms\": %.1f, "
      "\"two_process_fanin_rss_mb\": %.1f, \"storm_agents\": %d, "
      "\"storm_drained_s\": %d, \"storm_worst_second_p99_ms\": %.0f, "
      "\"storm_peak_rss_mb\": %.1f, \"storm_failed\": %d}\n",
      median.per_s, median.copy_per_s, median.Ratio(), best, best_p99,
      peak_rss, secure_per_s, secure_per_s / fresh_plain_per_s, cpu_ratio,
      two_per_s / one_per_s, two.p99_ms, two.rss_mb, storm.streams, storm_drained,
      storm_worst_p99, storm.rss_mb, storm.failed);
  return plain.failures > 0 || secure_failures > 0 || !two_exact ? 1 : 0;
}

}  // namespace
}  // namespace metrics::bench

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  return metrics::bench::Run();
}
