// The follow benchmark (docs/benchmarks.md, "Followers"). Starts metricsd
// on a throwaway database (run it under pg_virtualenv: bench/follow.sh) and
// measures, in one run:
//   1. one trial's cost by its viewers (first, while the database is small
//      and quiet): one trial's agents report with 1, 10 and 100 followers of
//      it (nothing else running); PostgreSQL's and metricsd's CPU per report
//      stored, whose ratio from 1 to 100 viewers says whether viewers cost
//      queries;
//   2. many viewers: agents report once a second (realistic reports, as
//      bench/ingest.sh's fan-in), and for each step of --follower_steps that
//      many HTTP follows are held open, as profiler tabs hold them: ten per
//      trial and 100 more on the first trial, each following one agent's
//      every series (CHART view, NDJSON). For each update a follower reads,
//      the time from the sample's report to its delivery (p50, p99, max),
//      metricsd's resident memory and the CPU of metricsd and PostgreSQL.
// Prints a table, then one JSON object as the last line.
#include <arpa/inet.h>
#include <grpcpp/create_channel.h>
#include <netinet/in.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <memory>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "bench/cpu_time.h"
#include "bench/fan_in_stream.h"
#include "common/status_macros.h"
#include "storage/pg/testing/pg_checks.h"
#include "tests/testing/metricsd_process.h"
#include "tests/testing/test_database.h"
#include "tests/testing/trials.h"

ABSL_FLAG(int, agents, 1000, "Agents reporting once a second.");
ABSL_FLAG(int, agents_per_trial, 5, "Agents of each trial.");
ABSL_FLAG(std::string, follower_steps, "2100",
          "Follower counts of the many-viewers run (10 per trial, the last "
          "100 on the first trial).");
ABSL_FLAG(int, measure_seconds, 20, "Measured seconds per step.");
ABSL_FLAG(std::string, viewer_steps, "1,10,100",
          "Followers of the one trial of the cost-by-viewers run.");
ABSL_FLAG(int, alone_agents, 10,
          "Agents of the one trial of the cost-by-viewers run.");

namespace metrics::bench {
namespace {

double Percentile(std::vector<double> values, double p) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  return values[std::min(values.size() - 1,
                         static_cast<size_t>(p * values.size()))];
}

// HTTP follows over plain sockets, read by one epoll thread: HTTP/1.0, so
// the NDJSON body comes unchunked and ends with the connection.
class Followers {
 public:
  explicit Followers(int port) : port_(port), epoll_(::epoll_create1(0)) {
    reader_ = std::thread([this] { Read(); });
  }
  ~Followers() {
    stop_ = true;
    reader_.join();
    CloseAll();
    ::close(epoll_);
  }

  // Opens a follow of `agent`'s series of `trial`.
  bool Open(int32_t trial, const std::string& agent) {
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_port = htons(static_cast<uint16_t>(port_));
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0) {
      ::close(fd);
      return false;
    }
    const std::string request = absl::StrCat(
        "GET /api/v1/trials/", trial, "/metrics/system/follow?view=CHART&agentId=",
        agent, " HTTP/1.0\r\n\r\n");
    if (::send(fd, request.data(), request.size(), MSG_NOSIGNAL) !=
        static_cast<ssize_t>(request.size())) {
      ::close(fd);
      return false;
    }
    auto state = std::make_unique<State>();
    state->fd = fd;
    epoll_event event{};
    event.events = EPOLLIN;
    event.data.ptr = state.get();
    absl::MutexLock lock(&mu_);
    ::epoll_ctl(epoll_, EPOLL_CTL_ADD, fd, &event);
    states_.push_back(std::move(state));
    return true;
  }

  void CloseAll() {
    absl::MutexLock lock(&mu_);
    for (auto& s : states_) {
      ::epoll_ctl(epoll_, EPOLL_CTL_DEL, s->fd, nullptr);
      ::close(s->fd);
    }
    states_.clear();
  }

  // Follows that have their first answer, and those refused or ended.
  int started() {
    absl::MutexLock lock(&mu_);
    return static_cast<int>(std::count_if(
        states_.begin(), states_.end(), [](const auto& s) { return s->lines > 0; }));
  }
  int failed() {
    absl::MutexLock lock(&mu_);
    return failed_;
  }
  // From now, records each update's delivery latencies.
  void Measure(bool on) {
    absl::MutexLock lock(&mu_);
    measuring_ = on;
  }
  std::vector<double> TakeLatencies() {
    absl::MutexLock lock(&mu_);
    return std::move(latencies_ms_);
  }
  int64_t updates() {
    absl::MutexLock lock(&mu_);
    return updates_;
  }

 private:
  struct State {
    int fd = -1;
    std::string pending;
    bool head = false;
    int64_t lines = 0;
    bool ended = false;
  };

  void Read() {
    std::vector<epoll_event> events(256);
    std::vector<char> buffer(1 << 16);
    while (!stop_) {
      const int n = ::epoll_wait(epoll_, events.data(), events.size(), 100);
      const double now_ms = absl::ToUnixMillis(absl::Now());
      absl::MutexLock lock(&mu_);
      for (int i = 0; i < n; ++i) {
        State& s = *static_cast<State*>(events[i].data.ptr);
        if (s.ended) continue;
        const ssize_t got = ::recv(s.fd, buffer.data(), buffer.size(), 0);
        if (got <= 0) {
          s.ended = true;
          ++failed_;
          ::epoll_ctl(epoll_, EPOLL_CTL_DEL, s.fd, nullptr);
          continue;
        }
        s.pending.append(buffer.data(), static_cast<size_t>(got));
        if (!s.head) {
          const size_t end = s.pending.find("\r\n\r\n");
          if (end == std::string::npos) continue;
          if (s.pending.compare(0, 12, "HTTP/1.1 200") != 0) {
            if (failed_ == 0) {
              std::fprintf(stderr, "bench: a follow was refused: %s\n",
                           s.pending.substr(0, 300).c_str());
            }
            s.ended = true;
            ++failed_;
            ::epoll_ctl(epoll_, EPOLL_CTL_DEL, s.fd, nullptr);
            continue;
          }
          s.head = true;
          s.pending.erase(0, end + 4);
        }
        size_t newline;
        while ((newline = s.pending.find('\n')) != std::string::npos) {
          if (s.lines++ > 0 && measuring_) Update(s.pending.substr(0, newline), now_ms);
          s.pending.erase(0, newline + 1);
        }
      }
    }
  }

  // An update line: each series' newest sample, and how long ago it was.
  void Update(const std::string& line, double now_ms) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    ++updates_;
    const std::string kKey = "\"lastSampleMs\":";
    for (size_t at = line.find(kKey); at != std::string::npos;
         at = line.find(kKey, at + 1)) {
      const size_t from = at + kKey.size();
      const size_t to = line.find_first_of(",}", from);
      double ms;
      if (absl::SimpleAtod(line.substr(from, to - from), &ms)) {
        latencies_ms_.push_back(now_ms - ms);
      }
    }
  }

  const int port_;
  const int epoll_;
  std::atomic<bool> stop_{false};
  std::thread reader_;
  absl::Mutex mu_;
  std::vector<std::unique_ptr<State>> states_ ABSL_GUARDED_BY(mu_);
  int failed_ ABSL_GUARDED_BY(mu_) = 0;
  bool measuring_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<double> latencies_ms_ ABSL_GUARDED_BY(mu_);
  int64_t updates_ ABSL_GUARDED_BY(mu_) = 0;
};

std::string AgentName(int32_t trial, int a) {
  return absl::StrCat("agent-", trial, "-", a);
}

// Agents of trials [first, first + trials), each sending once a second,
// spread evenly over the second, until stopped.
class Agents {
 public:
  Agents(const std::string& target, int32_t first, int trials, int per_trial) {
    for (int c = 0; c < std::max(1, trials * per_trial / 100); ++c) {
      grpc::ChannelArguments args;
      args.SetInt("metrics.bench.connection", c);
      stubs_.push_back(v1::IngestService::NewStub(grpc::CreateCustomChannel(
          target, grpc::InsecureChannelCredentials(), args)));
    }
    for (int t = 0; t < trials; ++t) {
      for (int a = 0; a < per_trial; ++a) {
        streams_.push_back(std::make_unique<FanInStream>(
            stubs_[streams_.size() % stubs_.size()].get(), first + t,
            AgentName(first + t, a), [this](absl::Time, double ms) {
              ++acked_;
              absl::MutexLock lock(&mu_);
              ack_ms_.push_back(ms);
            }));
      }
    }
    sender_ = std::thread([this] {
      constexpr int kTicks = 100;
      const absl::Time start = absl::Now();
      for (int64_t tick = 0; !stop_; ++tick) {
        for (size_t i = tick % kTicks; i < streams_.size(); i += kTicks) {
          streams_[i]->SendOne();
        }
        absl::SleepFor(start + absl::Milliseconds(10 * (tick + 1)) - absl::Now());
      }
    });
  }
  ~Agents() {
    stop_ = true;
    sender_.join();
    for (auto& s : streams_) s->Close();
    for (auto& s : streams_) {
      if (!s->WaitDone(absl::Seconds(30))) {
        s->Cancel();
        s->WaitDone(absl::InfiniteDuration());
      }
    }
  }
  int64_t acked() const { return acked_; }
  // Each report's time from sending to its acknowledgement (stored and
  // committed), since the last call.
  std::vector<double> TakeAckLatencies() {
    absl::MutexLock lock(&mu_);
    return std::move(ack_ms_);
  }

 private:
  std::vector<std::unique_ptr<v1::IngestService::Stub>> stubs_;
  std::vector<std::unique_ptr<FanInStream>> streams_;
  std::atomic<int64_t> acked_{0};
  absl::Mutex mu_;
  std::vector<double> ack_ms_ ABSL_GUARDED_BY(mu_);
  std::atomic<bool> stop_{false};
  std::thread sender_;
};

absl::Status CreateTrials(const std::string& target, int32_t first, int count) {
  const std::shared_ptr<grpc::Channel> channel =
      grpc::CreateChannel(target, grpc::InsecureChannelCredentials());
  for (int32_t id = first; id < first + count; ++id) {
    RETURN_IF_ERROR(test_util::CreateTrial(channel, id));
  }
  return absl::OkStatus();
}

// Opens `count` follows (10 per trial from `first`, the last 100 on
// `first`), a few hundred at a time, and waits for their first answers.
void OpenFollows(Followers& followers, int32_t first, int trials, int count) {
  for (int k = 0; k < count; ++k) {
    const int32_t trial =
        k >= count - 100 ? first : first + (k / 10) % trials;
    followers.Open(trial, AgentName(trial, 0));
    if (k % 200 == 199) absl::SleepFor(absl::Milliseconds(100));
  }
  const absl::Time deadline = absl::Now() + absl::Seconds(60);
  while (followers.started() + followers.failed() < count &&
         absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(100));
  }
}

// A flag's comma-separated counts; what is not a number is skipped (an empty
// flag: no step).
std::vector<int> Steps(const std::string& flag) {
  std::vector<int> steps;
  for (absl::string_view text : absl::StrSplit(flag, ',')) {
    int n = 0;
    if (absl::SimpleAtoi(text, &n)) steps.push_back(n);
  }
  return steps;
}

struct Measured {
  int followers = 0, failed = 0;
  int64_t updates = 0;
  double p50_ms = 0, p99_ms = 0, max_ms = 0, rss_mb = 0;
  double ack_p50_ms = 0, ack_p99_ms = 0;  // report to its commit
  double cpu_metricsd_s = 0, cpu_postgres_s = 0;
  int64_t reports = 0;
};

Measured Measure(Followers& followers, Agents& agents,
                 const common::Subprocess& metricsd, pid_t postmaster,
                 int seconds) {
  Measured m;
  followers.TakeLatencies();
  followers.Measure(true);
  const int64_t acked_before = agents.acked();
  agents.TakeAckLatencies();
  const CpuUse cpu_before = CpuUse::Now(postmaster, {metricsd.pid()});
  for (int i = 0; i < seconds * 5; ++i) {
    m.rss_mb = std::max(m.rss_mb, metricsd.RssMb());
    absl::SleepFor(absl::Milliseconds(200));
  }
  const CpuUse cpu = CpuUse::Now(postmaster, {metricsd.pid()}) - cpu_before;
  followers.Measure(false);
  m.reports = agents.acked() - acked_before;
  const std::vector<double> acks = agents.TakeAckLatencies();
  m.ack_p50_ms = Percentile(acks, 0.5);
  m.ack_p99_ms = Percentile(acks, 0.99);
  m.cpu_metricsd_s = cpu.metricsd;
  m.cpu_postgres_s = cpu.postgres;
  std::vector<double> ms = followers.TakeLatencies();
  m.updates = followers.updates();
  m.p50_ms = Percentile(ms, 0.5);
  m.p99_ms = Percentile(ms, 0.99);
  m.max_ms = ms.empty() ? 0 : *std::max_element(ms.begin(), ms.end());
  m.failed = followers.failed();
  m.followers = followers.started();
  return m;
}

int Run() {
  rlimit limit;
  if (getrlimit(RLIMIT_NOFILE, &limit) == 0) {
    limit.rlim_cur = limit.rlim_max;
    setrlimit(RLIMIT_NOFILE, &limit);
  }
  absl::StatusOr<std::unique_ptr<test_util::TestDatabase>> db =
      test_util::TestDatabase::Create();
  if (!db.ok()) {
    std::fprintf(stderr, "bench: %s\n", db.status().ToString().c_str());
    return 1;
  }
  absl::StatusOr<std::string> data_directory = storage::pg::test_util::QueryScalar(
      (*db)->url(), "SELECT current_setting('data_directory')");
  const pid_t postmaster = data_directory.ok() ? PostmasterPid(*data_directory) : 0;
  absl::StatusOr<test_util::MetricsdProcess> metricsd = test_util::StartMetricsd(
      {METRICSD_PATH, "--database-url=" + (*db)->url(), "--auth=off",
       "--grpc-address=127.0.0.1:0", "--http-address=127.0.0.1:0"});
  if (postmaster == 0 || !metricsd.ok()) {
    std::fprintf(stderr, "bench: cannot start: %s\n",
                 metricsd.ok() ? "no postmaster" : metricsd.status().ToString().c_str());
    return 1;
  }
  const int agents_per_trial = absl::GetFlag(FLAGS_agents_per_trial);
  const int trials = absl::GetFlag(FLAGS_agents) / agents_per_trial;
  const int seconds = absl::GetFlag(FLAGS_measure_seconds);
  if (absl::Status created = CreateTrials(metricsd->grpc_target, 1, trials + 1);
      !created.ok()) {
    std::fprintf(stderr, "bench: trials: %s\n", created.ToString().c_str());
    return 1;
  }

  // One trial, its own agents only, by its number of viewers.
  const int32_t alone = trials + 1;
  const int alone_agents = absl::GetFlag(FLAGS_alone_agents);
  std::printf("one trial (%d agents) by its viewers\n%8s %8s %9s %20s %20s\n",
              alone_agents, "viewers", "reports", "p99_ms", "postgres_us/report",
              "metricsd_us/report");
  std::vector<std::pair<int, Measured>> by_viewers;
  {
    Agents agents(metricsd->grpc_target, alone, 1, alone_agents);
    absl::SleepFor(absl::Seconds(3));
    for (int viewers : Steps(absl::GetFlag(FLAGS_viewer_steps))) {
      Followers followers(metricsd->http_port);
      for (int v = 0; v < viewers; ++v) followers.Open(alone, AgentName(alone, 0));
      absl::SleepFor(absl::Seconds(3));
      if (followers.started() < viewers) {
        std::fprintf(stderr, "bench: %d of %d followers started\n",
                     followers.started(), viewers);
      }
      Measured m = Measure(followers, agents, *metricsd->process, postmaster, seconds);
      const double reports = std::max<int64_t>(1, m.reports);
      std::printf("%8d %8lld %9.0f %20.0f %20.0f\n", viewers,
                  static_cast<long long>(m.reports), m.p99_ms,
                  1e6 * m.cpu_postgres_s / reports, 1e6 * m.cpu_metricsd_s / reports);
      std::fflush(stdout);
      by_viewers.emplace_back(viewers, m);
    }
  }

  std::printf("\nmany viewers: %d agents in %d trials, one report a second\n",
              trials * agents_per_trial, trials);
  std::printf("%9s %7s %8s %9s %9s %9s %8s %10s %10s %11s\n", "followers",
              "failed", "updates", "p50_ms", "p99_ms", "max_ms", "rss_mb",
              "metricsd%", "postgres%", "ack_p99_ms");
  std::vector<Measured> steps;
  {
    Agents agents(metricsd->grpc_target, 1, trials, agents_per_trial);
    absl::SleepFor(absl::Seconds(3));
    for (int count : Steps(absl::GetFlag(FLAGS_follower_steps))) {
      Followers followers(metricsd->http_port);
      OpenFollows(followers, 1, trials, count);
      absl::SleepFor(absl::Seconds(2));
      Measured m = Measure(followers, agents, *metricsd->process, postmaster, seconds);
      std::printf("%9d %7d %8lld %9.0f %9.0f %9.0f %8.0f %10.0f %10.0f %11.0f\n",
                  m.followers, m.failed, static_cast<long long>(m.updates),
                  m.p50_ms, m.p99_ms, m.max_ms, m.rss_mb,
                  100 * m.cpu_metricsd_s / seconds, 100 * m.cpu_postgres_s / seconds,
                  m.ack_p99_ms);
      std::fflush(stdout);
      steps.push_back(m);
    }
  }

  std::string json = "{\"steps\":[";
  for (size_t i = 0; i < steps.size(); ++i) {
    const Measured& m = steps[i];
    absl::StrAppend(&json, i ? "," : "", "{\"followers\":", m.followers,
                    ",\"failed\":", m.failed, ",\"updates\":", m.updates,
                    ",\"p50_ms\":", m.p50_ms, ",\"p99_ms\":", m.p99_ms,
                    ",\"max_ms\":", m.max_ms, ",\"rss_mb\":", m.rss_mb,
                    ",\"ack_p50_ms\":", m.ack_p50_ms, ",\"ack_p99_ms\":", m.ack_p99_ms,
                    ",\"metricsd_cpu\":", m.cpu_metricsd_s / seconds,
                    ",\"postgres_cpu\":", m.cpu_postgres_s / seconds, "}");
  }
  json += "],\"by_viewers\":[";
  for (size_t i = 0; i < by_viewers.size(); ++i) {
    const auto& [viewers, m] = by_viewers[i];
    const double reports = std::max<int64_t>(1, m.reports);
    absl::StrAppend(&json, i ? "," : "", "{\"viewers\":", viewers,
                    ",\"p99_ms\":", m.p99_ms,
                    ",\"postgres_us_per_report\":", 1e6 * m.cpu_postgres_s / reports,
                    ",\"metricsd_us_per_report\":", 1e6 * m.cpu_metricsd_s / reports,
                    "}");
  }
  json += "]}";
  std::printf("%s\n", json.c_str());
  return 0;
}

}  // namespace
}  // namespace metrics::bench

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  return metrics::bench::Run();
}
