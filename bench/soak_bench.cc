// The overload soak (docs/benchmarks.md). Starts metricsd on a throwaway
// database (run it under pg_virtualenv: bench/soak.sh) and:
//   1. measures the server's capacity: bulk streams (the real client
//      library, client/reporter.h) record realistic reports (25 values) as
//      fast as acknowledgements allow;
//   2. for --minutes offers --overload times that (default 2x): the bulk
//      streams paced at that rate plus a fan-in of agents reporting once a
//      second, while a reader hammers chart queries and a few follows run;
//      with --slow_db_seconds the stream positions are locked for that long in
//      the middle (a slow database);
//   3. drops to half of what the server sustained over the overload's last
//      minute for --half_seconds, timing how long until it keeps pace again;
//   4. shuts every client down (all acknowledged) and checks in SQL that
//      each acknowledged value is stored once and the fan-in trial's
//      rollups equal its raw rows.
// Meanwhile it samples metricsd's RSS every second and counts what clients
// see: acknowledged values, Record calls slowed by flow control (blocked
// waiting for room), values a client had to drop (no room within its
// block timeout), streams refused with RESOURCE_EXHAUSTED (retried after the
// server's hint) and reconnects.
// Prints progress every 10 s, then one JSON object as the last line.
#include <grpcpp/create_channel.h>
#include <signal.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "client/reporter.h"
#include "common/proto_time.h"
#include "common/subprocess.h"
#include "proto/metrics/v1/query.grpc.pb.h"
#include "proto/metrics/v1/trials.grpc.pb.h"
#include "storage/pg/testing/pg_checks.h"
#include "tests/testing/realistic_batch.h"
#include "tests/testing/test_database.h"

ABSL_FLAG(double, minutes, 10, "Minutes of overload.");
ABSL_FLAG(double, overload, 2.0, "Offered load as a multiple of capacity.");
ABSL_FLAG(int, bulk_streams, 4, "Bulk streams (Reporters, one agent each).");
ABSL_FLAG(int, fanin_agents, 200, "Agents reporting once a second.");
ABSL_FLAG(int, follows, 3, "Follow streams running during the overload.");
ABSL_FLAG(bool, reader, true, "Run the reader hammering chart queries.");
ABSL_FLAG(int, history_days, 30,
          "Days of history (a report a minute) each bulk agent sends first, "
          "so that the reader's whole-run chart has its full max_points from "
          "the start instead of growing through the run (0: none).");
ABSL_FLAG(int, capacity_seconds, 20, "Seconds of the capacity measurement.");
ABSL_FLAG(int, half_seconds, 60, "Seconds at half capacity after the overload.");
ABSL_FLAG(int, slow_db_seconds, 0,
          "Lock the stream positions for this long in the middle of the "
          "overload (0: no slow stretch).");

namespace metrics::bench {
namespace {

using common::Subprocess;
using test_util::TestDatabase;
namespace pgtest = storage::pg::test_util;

constexpr int32_t kBulkTrial = 1;
constexpr int32_t kFanInTrial = 2;
constexpr int kValues = test_util::kRealisticValuesPerReport;

// The 25 realistic series, as Reporter measurements.
struct SeriesShape {
  std::vector<std::string> names, units, gpus;
};
SeriesShape RealisticShape() {
  v1::SystemMetricsBatch batch;
  test_util::DeclareRealisticSeries(batch);
  SeriesShape shape;
  for (const v1::SeriesDeclaration& s : batch.series()) {
    shape.names.push_back(s.name());
    shape.units.push_back(s.unit());
    shape.gpus.push_back(s.gpu_uuid());
  }
  return shape;
}

// What every client saw, summed.
struct ClientCounts {
  std::atomic<int64_t> slowed{0};             // Record calls that waited
  std::atomic<int64_t> resource_exhausted{0};  // stream ends saying so
};

// A Reporter and its agent's measurements; times are one millisecond apart
// from `origin`, so each report of an agent has its own time.
class Agent {
 public:
  static std::unique_ptr<Agent> Create(const std::string& target, int32_t trial,
                                       const std::string& id,
                                       client::OverflowPolicy policy,
                                       absl::Time origin, ClientCounts* counts) {
    client::ReporterOptions options;
    options.server_address = target;
    options.trial_id = trial;
    options.agent_id = id;
    options.overflow = policy;
    options.block_timeout = absl::Milliseconds(200);
    options.max_batch_samples = 5000;
    options.on_event = [counts](absl::string_view event) {
      if (absl::StrContains(event, "RESOURCE_EXHAUSTED")) ++counts->resource_exhausted;
    };
    absl::StatusOr<std::unique_ptr<client::Reporter>> reporter =
        client::Reporter::Create(std::move(options));
    if (!reporter.ok()) {
      std::fprintf(stderr, "soak: %s\n", reporter.status().ToString().c_str());
      return nullptr;
    }
    return std::unique_ptr<Agent>(
        new Agent(std::move(*reporter), origin, counts));
  }

  // Records the next report; false when the client had to drop it.
  bool RecordNext() { return RecordAt(origin_ + absl::Milliseconds(next_++)); }

  // Records a report at `time`, which must be before the origin (the
  // history).
  bool RecordAt(absl::Time time) {
    ++values_made_;
    for (size_t i = 0; i < values_.size(); ++i) {
      values_[i].value =
          static_cast<double>((values_made_ * 7 + i * 13) % 1000) / 10;
    }
    const absl::Time start = absl::Now();
    const absl::Status s = reporter_->Record(time, values_);
    if (absl::Now() - start > absl::Milliseconds(2)) ++counts_->slowed;
    return s.ok();
  }

  client::Reporter& reporter() { return *reporter_; }

 private:
  Agent(std::unique_ptr<client::Reporter> reporter, absl::Time origin,
        ClientCounts* counts)
      : reporter_(std::move(reporter)), origin_(origin), counts_(counts) {
    for (size_t i = 0; i < shape_.names.size(); ++i) {
      values_.push_back({shape_.names[i], 0, shape_.units[i], shape_.gpus[i]});
    }
  }

  const SeriesShape shape_ = RealisticShape();
  std::unique_ptr<client::Reporter> reporter_;
  const absl::Time origin_;
  ClientCounts* const counts_;
  std::vector<client::Measurement> values_;
  int64_t next_ = 0;
  int64_t values_made_ = 0;
};

// A bulk stream: records reports at `rate` per second (or as fast as the
// Reporter takes them when rate is 0) on a thread of its own.
class BulkSource {
 public:
  explicit BulkSource(std::unique_ptr<Agent> agent)
      : agent_(std::move(agent)), thread_([this] { Run(); }) {}
  ~BulkSource() { Stop(); }
  void Stop() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
  }
  void SetRate(double reports_per_s) { rate_ = reports_per_s; }
  Agent& agent() { return *agent_; }

 private:
  void Run() {
    absl::Time last = absl::Now();
    double due = 0;
    while (!stop_) {
      const double rate = rate_;
      if (rate <= 0) {
        agent_->RecordNext();
        continue;
      }
      const absl::Time now = absl::Now();
      // A source that fell behind does not make up more than 0.1 s: an
      // overloaded agent sheds what it could not send, it does not pile up.
      due = std::min(due + rate * absl::ToDoubleSeconds(now - last), rate * 0.1);
      last = now;
      while (due >= 1 && !stop_) {
        agent_->RecordNext();
        due -= 1;
      }
      absl::SleepFor(absl::Milliseconds(5));
    }
  }

  std::unique_ptr<Agent> agent_;
  std::atomic<bool> stop_{false};
  std::atomic<double> rate_{0};
  std::thread thread_;
};

int64_t Acknowledged(const std::vector<Agent*>& agents) {
  int64_t n = 0;
  for (Agent* a : agents) n += a->reporter().stats().acknowledged;
  return n;
}
int64_t Buffered(const std::vector<Agent*>& agents) {
  int64_t n = 0;
  for (Agent* a : agents) n += a->reporter().stats().buffered;
  return n;
}

int Run() {
  absl::StatusOr<std::unique_ptr<TestDatabase>> db = TestDatabase::Create();
  if (!db.ok()) {
    std::fprintf(stderr, "soak: %s\n", db.status().ToString().c_str());
    return 1;
  }
  const std::string url = (*db)->url();
  absl::StatusOr<std::unique_ptr<Subprocess>> metricsd = Subprocess::Start(
      {METRICSD_PATH, "--database-url=" + url, "--grpc-address=127.0.0.1:0",
       "--http-address=127.0.0.1:0", "--auth=off"});
  absl::StatusOr<std::string> line =
      metricsd.ok() ? (*metricsd)->WaitForLine("gRPC listening on", absl::Seconds(30))
                    : metricsd.status();
  if (!line.ok()) {
    std::fprintf(stderr, "soak: metricsd: %s\n", line.status().ToString().c_str());
    return 1;
  }
  const std::string target =
      absl::StrCat("127.0.0.1:", line->substr(line->rfind(':') + 1));
  // A whole-run chart of 100 series at 1000 points is some 6 MB: more than
  // gRPC's default 4 MB a message.
  grpc::ChannelArguments arguments;
  arguments.SetMaxReceiveMessageSize(64 << 20);
  auto channel = grpc::CreateCustomChannel(
      target, grpc::InsecureChannelCredentials(), arguments);
  {
    auto trials = v1::TrialService::NewStub(channel);
    for (int32_t id : {kBulkTrial, kFanInTrial}) {
      grpc::ClientContext context;
      v1::CreateTrialRequest request;
      request.set_id(id);
      v1::Trial trial;
      if (grpc::Status s = trials->CreateTrial(&context, request, &trial); !s.ok()) {
        std::fprintf(stderr, "soak: CreateTrial: %s\n", s.error_message().c_str());
        return 1;
      }
    }
  }

  ClientCounts counts;
  std::vector<Agent*> all, bulk_agents;
  const absl::Time bulk_origin = absl::Now() - absl::Hours(24 * 30);
  std::vector<std::unique_ptr<Agent>> bulk_made;
  for (int i = 0; i < absl::GetFlag(FLAGS_bulk_streams); ++i) {
    bulk_made.push_back(
        Agent::Create(target, kBulkTrial, absl::StrCat("bulk-", i),
                      client::OverflowPolicy::kBlock, bulk_origin, &counts));
    if (bulk_made.back() == nullptr) return 1;
    bulk_agents.push_back(bulk_made.back().get());
  }
  // History before the origin, so it never meets a later report's time;
  // stored before the capacity is measured.
  const int history_reports = absl::GetFlag(FLAGS_history_days) * 24 * 60;
  for (Agent* a : bulk_agents) {
    for (int r = 0; r < history_reports; ++r) {
      a->RecordAt(bulk_origin - absl::Minutes(history_reports - r));
    }
  }
  for (Agent* a : bulk_agents) {
    if (!a->reporter().Flush(absl::Now() + absl::Minutes(2)).ok()) {
      std::fprintf(stderr, "soak: the history was not acknowledged in time\n");
      return 1;
    }
  }
  // metricsd seals the history as it comes (its agents are past
  // --seal-after-reports); the capacity is measured once that is done, so
  // it is the capacity of ingest with its sealing, not of ingest beside a
  // backlog of history.
  for (int i = 0; i < 600; ++i) {
    absl::StatusOr<std::string> waiting = pgtest::QueryScalar(
        url, absl::StrCat("SELECT count(*) FROM metrics_profiling WHERE trial_id = ", kBulkTrial,
                          " AND packed_values IS NOT NULL"));
    if (!waiting.ok() || std::stoll(*waiting) < 2000 * absl::GetFlag(FLAGS_bulk_streams)) break;
    absl::SleepFor(absl::Milliseconds(100));
  }
  std::vector<std::unique_ptr<BulkSource>> bulk;
  for (auto& agent : bulk_made) {
    bulk.push_back(std::make_unique<BulkSource>(std::move(agent)));
  }
  all = bulk_agents;

  // 1. Capacity: as fast as acknowledgements allow; the first 5 s warm up.
  const int capacity_s = absl::GetFlag(FLAGS_capacity_seconds);
  absl::SleepFor(absl::Seconds(5));
  const int64_t acked_before = Acknowledged(bulk_agents);
  const absl::Time measure_start = absl::Now();
  absl::SleepFor(absl::Seconds(std::max(1, capacity_s - 5)));
  const double capacity = (Acknowledged(bulk_agents) - acked_before) /
                          absl::ToDoubleSeconds(absl::Now() - measure_start);
  for (auto& b : bulk) b->SetRate(1e-9);  // idle while the backlog drains
  for (Agent* a : bulk_agents) (void)a->reporter().Flush(absl::Now() + absl::Minutes(2));
  std::printf("capacity: %.0f values/s (%d bulk streams, %d s)\n", capacity,
              absl::GetFlag(FLAGS_bulk_streams), capacity_s);
  std::fflush(stdout);

  // 2. Overload: bulk at overload x capacity (minus the fan-in's share),
  // the fan-in, a reader and follows.
  const double overload = absl::GetFlag(FLAGS_overload);
  const int fanin_n = absl::GetFlag(FLAGS_fanin_agents);
  const double bulk_rate =
      std::max(0.0, overload * capacity - fanin_n * kValues) / kValues /
      bulk.size();
  for (auto& b : bulk) b->SetRate(bulk_rate);
  std::vector<std::unique_ptr<Agent>> fanin;
  const absl::Time fanin_origin = absl::Now();
  for (int i = 0; i < fanin_n; ++i) {
    fanin.push_back(Agent::Create(target, kFanInTrial, absl::StrCat("fanin-", i),
                                  client::OverflowPolicy::kDropOldest,
                                  fanin_origin, &counts));
    if (fanin.back() == nullptr) return 1;
    all.push_back(fanin.back().get());
  }
  std::atomic<bool> stop_fanin{false};
  std::thread fanin_thread([&] {
    // Each agent once a second, spread over the second; an agent's k-th
    // report is its k-th millisecond after the origin, a distinct time.
    while (!stop_fanin) {
      const absl::Time second = absl::Now();
      for (int i = 0; i < fanin_n && !stop_fanin; ++i) {
        fanin[i]->RecordNext();
        absl::SleepFor(second + absl::Milliseconds(1000 * (i + 1) / fanin_n) -
                       absl::Now());
      }
    }
  });
  std::atomic<bool> stop_readers{false};
  std::atomic<int64_t> queries_ok{0}, queries_failed{0}, follow_messages{0};
  std::string last_query_error;  // written by the reader, read after join
  std::vector<double> query_ms;  // each answered chart's time, ditto
  std::thread reader([&] {
    auto query = v1::QueryService::NewStub(channel);
    while (!stop_readers && absl::GetFlag(FLAGS_reader)) {
      grpc::ClientContext context;
      context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
      v1::QuerySeriesRequest request;
      request.set_trial_id(kBulkTrial);
      request.set_max_points(1000);
      v1::QuerySeriesResponse response;
      const absl::Time asked = absl::Now();
      const grpc::Status status = query->QuerySeries(&context, request, &response);
      if (status.ok()) {
        ++queries_ok;
        query_ms.push_back(absl::ToDoubleMilliseconds(absl::Now() - asked));
      } else {
        ++queries_failed;
        last_query_error = absl::StrCat(status.error_code(), ": ",
                                        status.error_message());
      }
    }
  });
  std::vector<std::unique_ptr<grpc::ClientContext>> follow_contexts;
  std::vector<std::thread> follows;
  for (int f = 0; f < absl::GetFlag(FLAGS_follows); ++f) {
    follow_contexts.push_back(std::make_unique<grpc::ClientContext>());
    grpc::ClientContext* context = follow_contexts.back().get();
    follows.emplace_back([&, context] {
      auto query = v1::QueryService::NewStub(channel);
      v1::QuerySeriesRequest request;
      request.set_trial_id(kFanInTrial);
      request.add_agent_id("fanin-0");
      auto stream = query->FollowSeries(context, request);
      v1::QuerySeriesResponse response;
      while (stream->Read(&response)) ++follow_messages;
      (void)stream->Finish();
    });
  }

  std::vector<double> rss_samples;  // one a second from the overload's start
  const absl::Time overload_start = absl::Now();
  const absl::Duration overload_for =
      absl::Seconds(absl::GetFlag(FLAGS_minutes) * 60);
  std::thread slow_db;
  if (const int slow = absl::GetFlag(FLAGS_slow_db_seconds); slow > 0) {
    slow_db = std::thread([&, slow] {
      absl::SleepFor(overload_for / 2 - absl::Seconds(slow) / 2);
      std::printf("slow database: stream positions locked for %d s\n", slow);
      std::fflush(stdout);
      if (absl::Status s = pgtest::HoldIngestFor(url, absl::Seconds(slow)); !s.ok()) {
        std::fprintf(stderr, "soak: %s\n", s.ToString().c_str());
      }
    });
  }
  std::printf("overload: offering %.0f values/s (%.1fx) for %.1f min\n",
              overload * capacity, overload, absl::GetFlag(FLAGS_minutes));
  std::printf("  %6s %12s %9s %8s %10s %9s %9s %8s\n", "s", "acked/s",
              "rss MB", "threads", "slowed", "refused", "queries", "follows");
  int64_t acked_mark = Acknowledged(all);
  absl::Time mark = absl::Now();
  std::vector<int64_t> acked_each_second;  // cumulative
  for (int s = 1; absl::Now() - overload_start < overload_for; ++s) {
    absl::SleepFor(overload_start + absl::Seconds(s) - absl::Now());
    rss_samples.push_back((*metricsd)->RssMb());
    acked_each_second.push_back(Acknowledged(all));
    if (s % 10 == 0) {
      const int64_t acked = Acknowledged(all);
      std::printf("  %6d %12.0f %9.1f %8lld %10lld %9lld %9lld %8lld\n", s,
                  (acked - acked_mark) / absl::ToDoubleSeconds(absl::Now() - mark),
                  rss_samples.back(),
                  static_cast<long long>((*metricsd)->StatusField("Threads:")),
                  static_cast<long long>(counts.slowed.load()),
                  static_cast<long long>(counts.resource_exhausted.load()),
                  static_cast<long long>(queries_ok.load()),
                  static_cast<long long>(follow_messages.load()));
      std::fflush(stdout);
      acked_mark = acked;
      mark = absl::Now();
    }
  }
  const size_t overload_samples = rss_samples.size();
  const size_t n = acked_each_second.size();
  const int64_t last_minute_acked =
      n > 60 ? acked_each_second[n - 1] - acked_each_second[n - 61]
             : (n > 1 ? (acked_each_second[n - 1] - acked_each_second[0]) * 60 /
                            static_cast<int64_t>(n - 1)
                      : 0);

  // 3. Half capacity: recovered once a second's acknowledgements keep pace
  // with what is offered and the clients hold under a second of it. The
  // capacity here is what the server sustained over the overload's last
  // minute, saturated: the first measure was on an empty table with the
  // bulk streams alone, and the table has grown and the fan-in, reader and
  // follows share the machine since.
  const double sustained = last_minute_acked / 60.0;
  const double half = sustained / 2;
  for (auto& b : bulk) {
    b->SetRate(std::max(1.0, (half - fanin_n * kValues) / kValues / bulk.size()));
  }
  const absl::Time half_start = absl::Now();
  double recovery_s = -1;
  std::vector<std::pair<absl::Time, int64_t>> acks;  // 4 a second
  for (int tick = 1; absl::Now() - half_start <
                     absl::Seconds(absl::GetFlag(FLAGS_half_seconds));
       ++tick) {
    absl::SleepFor(half_start + absl::Milliseconds(250 * tick) - absl::Now());
    acks.push_back({absl::Now(), Acknowledged(all)});
    if (tick % 4 == 0) rss_samples.push_back((*metricsd)->RssMb());
    if (recovery_s < 0 && acks.size() >= 5) {
      const auto& [t0, a0] = acks[acks.size() - 5];
      const auto& [t1, a1] = acks.back();
      const double rate = (a1 - a0) / absl::ToDoubleSeconds(t1 - t0);
      if (rate >= 0.9 * half && Buffered(all) <= half) {
        recovery_s = absl::ToDoubleSeconds(t1 - half_start);
      }
    }
  }

  // 4. Stop: every client delivers what it holds, then the checks.
  for (auto& b : bulk) b->Stop();
  stop_fanin = true;
  fanin_thread.join();
  stop_readers = true;
  reader.join();
  for (auto& c : follow_contexts) c->TryCancel();
  for (std::thread& t : follows) t.join();
  if (slow_db.joinable()) slow_db.join();
  int64_t acked = 0, dropped = 0, unsent = 0, reconnects = 0;
  for (Agent* a : all) {
    const absl::Status shut = a->reporter().Shutdown(absl::Now() + absl::Minutes(5));
    const client::ReporterStats st = a->reporter().stats();
    acked += st.acknowledged;
    dropped += st.dropped;
    unsent += st.unsent;
    reconnects += st.connections - 1;
    if (!shut.ok()) {
      std::fprintf(stderr, "soak: shutdown: %s\n", shut.ToString().c_str());
    }
  }
  (*metricsd)->Signal(SIGTERM);
  (void)(*metricsd)->Wait(absl::Seconds(60));

  int64_t stored = 0, repeated_values = 0;
  for (int32_t trial : {kBulkTrial, kFanInTrial}) {
    absl::StatusOr<int64_t> values = pgtest::CountRawValues(url, trial);
    absl::StatusOr<int64_t> repeated = pgtest::CountRepeatedReports(url, trial);
    if (!values.ok() || !repeated.ok()) {
      std::fprintf(stderr, "soak: counting: %s %s\n",
                   values.status().ToString().c_str(),
                   repeated.status().ToString().c_str());
      return 1;
    }
    stored += *values;
    repeated_values += *repeated * kValues;
  }
  const int64_t duplicated = repeated_values;
  const int64_t lost = std::max<int64_t>(0, acked - (stored - duplicated));
  absl::StatusOr<int64_t> buckets =
      pgtest::CheckRollupsMatchRawRows(url, kFanInTrial);

  // RSS: "warm" is the overload's second minute (its second half when it is
  // shorter), "end" the last minute of the run.
  auto mean = [&](size_t from, size_t to) {
    to = std::min(to, rss_samples.size());
    from = std::min(from, to == 0 ? 0 : to - 1);
    double sum = 0;
    for (size_t i = from; i < to; ++i) sum += rss_samples[i];
    return to > from ? sum / (to - from) : 0.0;
  };
  const double rss_warm = overload_samples >= 120
                              ? mean(60, 120)
                              : mean(overload_samples / 2, overload_samples);
  const double rss_max = rss_samples.empty()
                             ? 0
                             : *std::max_element(rss_samples.begin(), rss_samples.end());
  const double rss_end =
      mean(rss_samples.size() > 60 ? rss_samples.size() - 60 : 0, rss_samples.size());

  std::printf("\nclients: %lld values acknowledged, %lld dropped by clients "
              "(no room within 200 ms), %lld unsent at shutdown; %lld Record "
              "calls slowed by flow control; %lld streams refused with "
              "RESOURCE_EXHAUSTED; %lld reconnects\n",
              static_cast<long long>(acked), static_cast<long long>(dropped),
              static_cast<long long>(unsent),
              static_cast<long long>(counts.slowed.load()),
              static_cast<long long>(counts.resource_exhausted.load()),
              static_cast<long long>(reconnects));
  std::sort(query_ms.begin(), query_ms.end());
  const auto query_percentile = [&](double p) {
    return query_ms.empty()
               ? 0.0
               : query_ms[std::min(query_ms.size() - 1,
                                   static_cast<size_t>(p * query_ms.size()))];
  };
  const double query_p50 = query_percentile(0.5), query_p99 = query_percentile(0.99),
               query_max = query_ms.empty() ? 0.0 : query_ms.back();
  std::printf("readers: %lld whole-run charts answered (p50 %.0f ms, p99 %.0f ms, "
              "max %.0f ms), %lld failed%s; %lld follow messages\n",
              static_cast<long long>(queries_ok.load()), query_p50, query_p99,
              query_max,
              static_cast<long long>(queries_failed.load()),
              last_query_error.empty()
                  ? ""
                  : absl::StrCat(" (the last: ", last_query_error, ")").c_str(),
              static_cast<long long>(follow_messages.load()));
  std::printf("stored: %lld values (%lld in repeated reports); rollups of the "
              "fan-in trial: %s\n",
              static_cast<long long>(stored), static_cast<long long>(duplicated),
              buckets.ok() ? absl::StrCat(*buckets, " buckets equal to raw").c_str()
                           : buckets.status().ToString().c_str());
  std::printf("sustained under overload (its last minute): %.0f values/s; "
              "then offered %.0f values/s\n", sustained, half);
  std::printf("rss MB: warm %.1f, max %.1f, end %.1f; recovery %.2f s\n",
              rss_warm, rss_max, rss_end, recovery_s);
  std::printf(
      "{\"minutes\": %.1f, \"offered_ratio\": %.2f, \"acked\": %lld, "
      "\"stored\": %lld, \"lost\": %lld, \"duplicated\": %lld, "
      "\"resource_exhausted\": %lld, \"rss_warm_mb\": %.1f, "
      "\"rss_max_mb\": %.1f, \"rss_end_mb\": %.1f, \"recovery_s\": %.2f, "
      "\"capacity\": %.0f, \"sustained\": %.0f, \"charts_answered\": %lld, "
      "\"charts_failed\": %lld, \"chart_p50_ms\": %.0f, \"chart_p99_ms\": %.0f, "
      "\"chart_max_ms\": %.0f, \"follow_messages\": %lld}\n",
      absl::GetFlag(FLAGS_minutes), overload, static_cast<long long>(acked),
      static_cast<long long>(stored), static_cast<long long>(lost),
      static_cast<long long>(duplicated),
      static_cast<long long>(counts.resource_exhausted.load()), rss_warm,
      rss_max, rss_end, recovery_s, capacity, sustained,
      static_cast<long long>(queries_ok.load()),
      static_cast<long long>(queries_failed.load()), query_p50, query_p99, query_max,
      static_cast<long long>(follow_messages.load()));
  return lost == 0 && duplicated == 0 && buckets.ok() ? 0 : 1;
}

}  // namespace
}  // namespace metrics::bench

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  return metrics::bench::Run();
}
