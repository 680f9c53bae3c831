// metricsd's security as processes show it, on a throwaway database with
// certificates made by openssl at run time: TLS on the gRPC and HTTP ports
// (a client trusting the right CA gets through; one trusting another CA,
// or speaking plaintext, does not), mutual TLS refusing a client without a
// certificate (or one of another CA) on both ports while metrics-agent
// with one reports, no plaintext listening
// beyond loopback with tokens unless asked, clear errors for bad TLS files,
// a revocation made by metricsctl seen by two metricsd processes on one
// database within 5 seconds, a revoked or expired token ending every kind of
// open stream on both, and an address that fails too often limited on both
// ports while a good client is not. No token ever appears in any process's
// output.
#include <grpcpp/create_channel.h>
#include <signal.h>

#include <stdlib.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <thread>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "common/grpc_status.h"
#include "common/subprocess.h"
#include "common/testing/eventually.h"
#include "common/testing/status_matchers.h"
#include "common/tls_files.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "proto/metrics/v1/ingest.grpc.pb.h"
#include "proto/metrics/v1/query.grpc.pb.h"
#include "proto/metrics/v1/trials.grpc.pb.h"
#include "storage/pg/pg_metric_store.h"
#include "storage/pg/pg_token_store.h"
#include "storage/pg/testing/pg_checks.h"
#include "tests/testing/test_certificates.h"
#include "tests/testing/test_database.h"

namespace metrics::test_util {

using ::metrics::common::Subprocess;
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

class SecurityTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_OK_AND_ASSIGN(db_, TestDatabase::Create());
    // Tests of this binary run in parallel processes: each its own files.
    std::string dir = ::testing::TempDir() + "/security-test-XXXXXX";
    ASSERT_NE(::mkdtemp(dir.data()), nullptr);
    dir_ = dir;
    ASSERT_OK_AND_ASSIGN(certs_, CreateTestCertificates(dir_ + "/pki"));
  }

  void TearDown() override {
    std::error_code ignored;
    if (!dir_.empty()) std::filesystem::remove_all(dir_, ignored);
  }

  // Starts a metricsd with `flags`; returns it with its gRPC and HTTP ports.
  struct Metricsd {
    std::unique_ptr<Subprocess> process;
    int grpc_port = 0;
    int http_port = 0;
  };
  Metricsd Start(std::vector<std::string> flags) {
    std::vector<std::string> argv = {METRICSD_PATH,
                                     "--database-url=" + db_->url(),
                                     "--grpc-address=127.0.0.1:0",
                                     "--http-address=127.0.0.1:0"};
    argv.insert(argv.end(), flags.begin(), flags.end());
    Metricsd m;
    absl::StatusOr<std::unique_ptr<Subprocess>> p = Subprocess::Start(argv);
    EXPECT_OK(p);
    if (!p.ok()) return m;
    absl::StatusOr<std::string> http =
        (*p)->WaitForLine("HTTP listening on", absl::Seconds(30));
    EXPECT_OK(http);
    if (!http.ok()) return m;
    const std::string grpc_line = (*p)->stdout_text().substr(
        0, (*p)->stdout_text().find('\n'));
    const std::vector<std::string> words = absl::StrSplit(grpc_line, ' ');
    EXPECT_TRUE(absl::SimpleAtoi(
        words[4].substr(words[4].rfind(':') + 1), &m.grpc_port))
        << grpc_line;
    const size_t colon = http->rfind(':', http->find(" (health"));
    EXPECT_TRUE(absl::SimpleAtoi(
        http->substr(colon + 1, http->find(' ', colon) - colon - 1),
        &m.http_port))
        << *http;
    m.process = *std::move(p);
    return m;
  }

  std::string CreateToken(storage::TokenRole role, int32_t trial = 0) {
    storage::pg::PgTokenStore tokens(db_->url());
    storage::TokenRequest request;
    request.role = role;
    if (trial != 0) request.trial_id = trial;
    request.name = "security test";
    absl::StatusOr<storage::CreatedToken> token =
        tokens.Create(request, absl::Now() + absl::Seconds(30));
    EXPECT_OK(token);
    if (!token.ok()) return "";
    secrets_.push_back(token->secret);
    ids_.push_back(token->token.id);
    return token->secret;
  }

  // ListTrials over gRPC to 127.0.0.1:port with `credentials` and `token`.
  static grpc::Status ListTrials(
      int port, std::shared_ptr<grpc::ChannelCredentials> credentials,
      const std::string& token) {
    auto stub = v1::TrialService::NewStub(grpc::CreateChannel(
        absl::StrCat("127.0.0.1:", port), std::move(credentials)));
    grpc::ClientContext context;
    context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(5)));
    if (!token.empty()) {
      context.AddMetadata("authorization", "Bearer " + token);
    }
    v1::ListTrialsResponse response;
    return stub->ListTrials(&context, v1::ListTrialsRequest(), &response);
  }

  std::shared_ptr<grpc::ChannelCredentials> Trusting(
      const std::string& ca, const std::string& cert = "",
      const std::string& key = "") {
    absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> c =
        common::GrpcChannelCredentials({ca, cert, key});
    EXPECT_OK(c);
    return c.ok() ? *c : grpc::InsecureChannelCredentials();
  }

  // curl's exit code and output for `url` with `args` (--cacert ...).
  std::pair<int, std::string> Curl(const std::string& url,
                                   std::vector<std::string> args) {
    std::vector<std::string> argv = {"curl", "-sS", "--max-time", "10", url};
    argv.insert(argv.end(), args.begin(), args.end());
    absl::StatusOr<std::unique_ptr<Subprocess>> p = Subprocess::Start(argv);
    EXPECT_OK(p);
    if (!p.ok()) return {-1, ""};
    absl::StatusOr<int> code = (*p)->Wait(absl::Seconds(30));
    EXPECT_OK(code);
    return {code.ok() ? *code : -1,
            (*p)->stdout_text() + (*p)->stderr_text()};
  }

  // No secret made by this test in any of `processes`' output.
  void ExpectNoTokenIn(std::vector<const Subprocess*> processes) {
    for (const Subprocess* p : processes) {
      for (const std::string& secret : secrets_) {
        // The hex part alone: a token cut or re-prefixed would show too.
        EXPECT_THAT(p->stdout_text() + p->stderr_text(),
                    Not(HasSubstr(secret.substr(4, 32))));
      }
    }
  }

  void Stop(Metricsd& m) {
    m.process->Signal(SIGTERM);
    absl::StatusOr<int> code = m.process->Wait(absl::Seconds(30));
    EXPECT_OK(code);
    EXPECT_EQ(code.ok() ? *code : -1, 0) << m.process->stderr_text();
  }

  std::unique_ptr<TestDatabase> db_;
  std::string dir_;
  TestCertificates certs_;
  std::vector<std::string> secrets_;
  std::vector<int64_t> ids_;
};

TEST_F(SecurityTest, TlsServesOnlyClientsThatTrustItsCertificate) {
  Metricsd m = Start({"--tls-cert=" + certs_.server_cert,
                      "--tls-key=" + certs_.server_key});
  ASSERT_NE(m.grpc_port, 0);
  EXPECT_THAT(m.process->stdout_text(), HasSubstr("(TLS)"));
  const std::string admin = CreateToken(storage::TokenRole::kAdmin);

  EXPECT_OK(common::FromGrpcStatus(
      ListTrials(m.grpc_port, Trusting(certs_.ca), admin)));
  EXPECT_EQ(ListTrials(m.grpc_port, Trusting(certs_.ca), "").error_code(),
            grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(
      ListTrials(m.grpc_port, Trusting(certs_.other_ca), admin).error_code(),
      grpc::StatusCode::UNAVAILABLE);
  EXPECT_EQ(ListTrials(m.grpc_port, grpc::InsecureChannelCredentials(), admin)
                .error_code(),
            grpc::StatusCode::UNAVAILABLE);

  const std::string https =
      absl::StrCat("https://127.0.0.1:", m.http_port, "/api/v1/trials");
  auto [code, out] = Curl(https, {"--cacert", certs_.ca, "-H",
                                  "Authorization: Bearer " + admin});
  EXPECT_EQ(code, 0) << out;
  EXPECT_THAT(out, HasSubstr("{"));
  std::tie(code, out) =
      Curl(https, {"--cacert", certs_.ca, "-o", "/dev/null", "-w",
                   "%{http_code}"});
  EXPECT_EQ(out, "401");
  std::tie(code, out) = Curl(https, {"--cacert", certs_.other_ca});
  EXPECT_EQ(code, 60) << out;  // curl: the peer's certificate is not trusted
  std::tie(code, out) = Curl(
      absl::StrCat("http://127.0.0.1:", m.http_port, "/healthz"), {});
  EXPECT_NE(code, 0) << out;  // plaintext gets no answer
  // The port still serves after the plaintext and untrusted attempts.
  std::tie(code, out) = Curl(
      absl::StrCat("https://127.0.0.1:", m.http_port, "/healthz"),
      {"--cacert", certs_.ca});
  EXPECT_EQ(out, "{\"status\":\"SERVING\"}");
  Stop(m);
  ExpectNoTokenIn({m.process.get()});
}

TEST_F(SecurityTest, AFollowOverHttpsEndsWhenItsClientLeaves) {
  Metricsd m = Start({"--tls-cert=" + certs_.server_cert,
                      "--tls-key=" + certs_.server_key});
  ASSERT_NE(m.http_port, 0);
  const std::string admin = CreateToken(storage::TokenRole::kAdmin);
  storage::pg::PgMetricStoreOptions store;
  store.database_url = db_->url();
  ASSERT_OK(storage::pg::PgMetricStore::Create(store)->CreateTrial(
      9, absl::Now() + absl::Seconds(30)));
  const std::string base = absl::StrCat("https://127.0.0.1:", m.http_port);
  const std::vector<std::string> auth = {"--cacert", certs_.ca, "-H",
                                         "Authorization: Bearer " + admin};
  std::string last_scrape;
  const auto open_follows = [&] {
    auto [code, out] = Curl(base + "/metrics", auth);
    last_scrape = absl::StrCat("curl exit ", code, ": ", out.substr(0, 2000));
    const std::string key = "metricsd_open_streams{rpc=\"FollowSeries\"} ";
    const size_t at = out.find(key);
    int n = -1;
    if (code == 0 && at != std::string::npos) {
      (void)absl::SimpleAtoi(
          out.substr(at + key.size(), out.find('\n', at) - at - key.size()), &n);
    }
    return n;
  };
  // The trial stays ACTIVE: only the client's leaving can end the stream.
  std::vector<std::string> follow = auth;
  follow.insert(follow.end(), {"-N", "--max-time", "2"});
  auto [code, out] = Curl(base + "/api/v1/trials/9/metrics/system/follow", follow);
  EXPECT_EQ(code, 28) << out;  // curl's own timeout: it left mid-stream
  EXPECT_THAT(out, HasSubstr("{\"result\""));
  int open = -1;
  test_util::Eventually([&] { return (open = open_follows()) == 0; },
                        absl::Seconds(10), absl::Milliseconds(200));
  EXPECT_EQ(open, 0) << "the follow of a client that left is still open; "
                     << "the last /metrics: " << last_scrape;
  Stop(m);
}

TEST_F(SecurityTest, MutualTlsRefusesClientsWithoutACertificate) {
  Metricsd m = Start({"--tls-cert=" + certs_.server_cert,
                      "--tls-key=" + certs_.server_key,
                      "--tls-client-ca=" + certs_.ca});
  ASSERT_NE(m.grpc_port, 0);
  storage::pg::PgMetricStoreOptions store;
  store.database_url = db_->url();
  ASSERT_OK(storage::pg::PgMetricStore::Create(store)->CreateTrial(
      8, absl::Now() + absl::Seconds(30)));
  const std::string reporter = CreateToken(storage::TokenRole::kReporter, 8);
  const std::string viewer = CreateToken(storage::TokenRole::kViewer);

  EXPECT_EQ(ListTrials(m.grpc_port, Trusting(certs_.ca), viewer).error_code(),
            grpc::StatusCode::UNAVAILABLE);
  EXPECT_OK(common::FromGrpcStatus(ListTrials(
      m.grpc_port,
      Trusting(certs_.ca, certs_.client_cert, certs_.client_key), viewer)));

  // metrics-agent with its certificate and a reporter token reports.
  const std::string token_path = dir_ + "/token";
  std::ofstream(token_path) << reporter << "\n";
  ASSERT_OK_AND_ASSIGN(
      auto agent,
      Subprocess::Start({METRICS_AGENT_PATH,
                         absl::StrCat("--server=127.0.0.1:", m.grpc_port),
                         "--trial-id=8", "--interval=100ms",
                         "--token-file=" + token_path,
                         "--tls-ca=" + certs_.ca,
                         "--tls-cert=" + certs_.client_cert,
                         "--tls-key=" + certs_.client_key,
                         "--nvml-library=/nonexistent/libnvidia-ml.so.1"}));
  const auto stored = [&] {
    absl::StatusOr<std::string> n = storage::pg::test_util::QueryScalar(
        db_->url(), "SELECT count(*) FROM metrics WHERE trial_id = 8");
    int64_t count = 0;
    return n.ok() && absl::SimpleAtoi(*n, &count) ? count : int64_t{0};
  };
  EXPECT_TRUE(test_util::Eventually([&] { return stored() >= 2; },
                                    absl::Seconds(60), absl::Milliseconds(50)))
      << agent->stderr_text();
  agent->Signal(SIGTERM);
  ASSERT_OK_AND_ASSIGN(int code, agent->Wait(absl::Seconds(30)));
  EXPECT_EQ(code, 0) << agent->stderr_text();
  EXPECT_THAT(agent->stderr_text(), HasSubstr("(TLS)"));

  // The HTTP port asks for the certificate too: none, or one of another CA,
  // ends the handshake before any request is read.
  const std::string https =
      absl::StrCat("https://127.0.0.1:", m.http_port, "/api/v1/trials");
  const std::vector<std::string> as_viewer = {
      "--cacert", certs_.ca, "-H", "Authorization: Bearer " + viewer};
  const auto curl_with = [&](std::vector<std::string> extra) {
    std::vector<std::string> args = as_viewer;
    args.insert(args.end(), extra.begin(), extra.end());
    return Curl(https, args);
  };
  auto [refused, none_out] = curl_with({});
  EXPECT_NE(refused, 0) << none_out;
  EXPECT_THAT(none_out, Not(HasSubstr("\"trials\"")));
  auto [stranger, stranger_out] = curl_with(
      {"--cert", certs_.other_client_cert, "--key", certs_.other_client_key});
  EXPECT_NE(stranger, 0) << stranger_out;
  EXPECT_THAT(stranger_out, Not(HasSubstr("\"trials\"")));
  auto [served, served_out] =
      curl_with({"--cert", certs_.client_cert, "--key", certs_.client_key});
  EXPECT_EQ(served, 0) << served_out;
  EXPECT_THAT(served_out, HasSubstr("\"trials\""));
  Stop(m);
  ExpectNoTokenIn({m.process.get(), agent.get()});

  // Asked per port: the HTTP port may serve browsers without certificates.
  Metricsd grpc_only = Start({"--tls-cert=" + certs_.server_cert,
                              "--tls-key=" + certs_.server_key,
                              "--tls-client-ca=" + certs_.ca,
                              "--tls-client-ca-on-http=false"});
  ASSERT_NE(grpc_only.http_port, 0);
  EXPECT_EQ(ListTrials(grpc_only.grpc_port, Trusting(certs_.ca), viewer)
                .error_code(),
            grpc::StatusCode::UNAVAILABLE);
  auto [open_code, open_out] =
      Curl(absl::StrCat("https://127.0.0.1:", grpc_only.http_port,
                        "/api/v1/trials"),
           as_viewer);
  EXPECT_EQ(open_code, 0) << open_out;
  EXPECT_THAT(open_out, HasSubstr("\"trials\""));
  Stop(grpc_only);
}

TEST_F(SecurityTest, RefusesPlaintextTokensBeyondLoopbackAndBadTlsFiles) {
  const auto refused = [&](std::vector<std::string> flags,
                           const std::string& message) {
    std::vector<std::string> argv = {METRICSD_PATH,
                                     "--database-url=" + db_->url()};
    argv.insert(argv.end(), flags.begin(), flags.end());
    absl::StatusOr<std::unique_ptr<Subprocess>> p = Subprocess::Start(argv);
    ASSERT_OK(p);
    absl::StatusOr<int> code = (*p)->Wait(absl::Seconds(30));
    ASSERT_OK(code);
    EXPECT_EQ(*code, 1) << (*p)->stderr_text();
    EXPECT_THAT((*p)->stderr_text(), HasSubstr(message));
  };
  refused({"--grpc-address=0.0.0.0:0", "--http-address=127.0.0.1:0"},
          "--grpc-address 0.0.0.0:0: not a loopback address, and without TLS "
          "the API tokens would cross the network in plaintext; give "
          "--tls-cert and --tls-key, or --insecure-listen to accept that");
  refused({"--grpc-address=127.0.0.1:0", "--http-address=:0"},
          "--http-address :0: not a loopback address");
  refused({"--tls-cert=/nonexistent/cert.pem", "--tls-key=" + certs_.server_key},
          "--tls-cert /nonexistent/cert.pem: cannot read (No such file or "
          "directory)");
  refused({"--tls-cert=" + certs_.server_cert},
          "--tls-cert and --tls-key: give both or neither");
  refused({"--grpc-address=127.0.0.1:0", "--http-address=127.0.0.1:0",
           "--tls-cert=" + certs_.server_cert,
           "--tls-key=" + certs_.client_key},
          "--tls-key: does not match the certificate of --tls-cert");

  // Asked for, or with TLS, or with auth off, all interfaces are fine.
  for (const std::vector<std::string>& flags :
       std::vector<std::vector<std::string>>{
           {"--insecure-listen"},
           {"--tls-cert=" + certs_.server_cert,
            "--tls-key=" + certs_.server_key},
           {"--auth=off"}}) {
    std::vector<std::string> argv = {"--grpc-address=0.0.0.0:0",
                                     "--http-address=0.0.0.0:0"};
    argv.insert(argv.end(), flags.begin(), flags.end());
    Metricsd m = Start(argv);
    ASSERT_NE(m.grpc_port, 0) << flags[0];
    Stop(m);
  }
}

TEST_F(SecurityTest, RevocationReachesEveryMetricsdWithinFiveSeconds) {
  Metricsd first = Start({});
  Metricsd second = Start({});
  ASSERT_NE(first.grpc_port, 0);
  ASSERT_NE(second.grpc_port, 0);
  const std::string viewer = CreateToken(storage::TokenRole::kViewer);
  const auto insecure = grpc::InsecureChannelCredentials();
  ASSERT_OK(common::FromGrpcStatus(ListTrials(first.grpc_port, insecure, viewer)));
  ASSERT_OK(common::FromGrpcStatus(ListTrials(second.grpc_port, insecure, viewer)));

  ASSERT_OK_AND_ASSIGN(
      auto revoke,
      Subprocess::Start({METRICSCTL_PATH, "tokens", "revoke",
                         absl::StrCat(ids_.back()),
                         "--database-url=" + db_->url()}));
  ASSERT_OK_AND_ASSIGN(int code, revoke->Wait(absl::Seconds(30)));
  ASSERT_EQ(code, 0) << revoke->stderr_text();
  const absl::Time revoked = absl::Now();
  for (const Metricsd* m : {&first, &second}) {
    test_util::Eventually(
        [&] {
          return ListTrials(m->grpc_port, insecure, viewer).error_code() ==
                 grpc::StatusCode::UNAUTHENTICATED;
        },
        revoked + absl::Seconds(10) - absl::Now(), absl::Milliseconds(100));
    const absl::Duration took = absl::Now() - revoked;
    std::cerr << "[ revoked ] refused by metricsd on port " << m->grpc_port
              << " after " << absl::FormatDuration(took) << "\n";
    EXPECT_LT(took, absl::Seconds(5));
  }
  Stop(first);
  Stop(second);
  ExpectNoTokenIn({first.process.get(), second.process.get(), revoke.get()});
}

// One open stream of each long-lived kind, on one metricsd: an ingest
// stream sending a batch every 200 ms (with `reporter`), and with `viewer`
// a gRPC follow, a REST follow and a legacy REST follow. Each notes when and
// how it ended.
class OpenStreams {
 public:
  struct Ended {
    absl::Time at = absl::InfiniteFuture();
    std::string how;  // the status, or curl's output
    bool unauthenticated = false;
  };

  OpenStreams(int grpc_port, int http_port, int32_t trial,
              const std::string& reporter, const std::string& viewer)
      : channel_(grpc::CreateChannel(absl::StrCat("127.0.0.1:", grpc_port),
                                     grpc::InsecureChannelCredentials())) {
    threads_.emplace_back([this, trial, reporter, grpc_port] {
      Ingest(trial, reporter, absl::StrCat("revocation-test-", grpc_port));
    });
    threads_.emplace_back([this, trial, viewer] { Follow(trial, viewer); });
    const std::string base = absl::StrCat("http://127.0.0.1:", http_port);
    for (const std::string& path :
         {absl::StrCat("/api/v1/trials/", trial, "/metrics/system/follow"),
          absl::StrCat("/api/v1/trials/", trial,
                       "/profiler/metrics?follow=true")}) {
      threads_.emplace_back([this, url = base + path, viewer] {
        Curl(url, viewer);
      });
    }
  }
  ~OpenStreams() {
    stop_ = true;
    for (auto& t : threads_) t.join();
  }

  // The kinds that ended, with how; all four once every one has.
  std::map<std::string, Ended> ended() {
    absl::MutexLock lock(&mu_);
    return ended_;
  }
  // The batches acknowledged so far.
  int64_t acked() const { return acked_.load(); }

 private:
  void End(const std::string& kind, std::string how, bool unauthenticated) {
    absl::MutexLock lock(&mu_);
    ended_[kind] = Ended{absl::Now(), std::move(how), unauthenticated};
  }

  void Ingest(int32_t trial, const std::string& token,
              const std::string& stream_id) {
    auto stub = v1::IngestService::NewStub(channel_);
    grpc::ClientContext context;
    context.AddMetadata("authorization", "Bearer " + token);
    context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(60)));
    auto stream = stub->StreamSystemMetrics(&context);
    v1::StreamSystemMetricsRequest open;
    open.mutable_open()->set_stream_id(stream_id);
    open.mutable_open()->set_trial_id(trial);
    v1::StreamSystemMetricsResponse ack;
    if (stream->Write(open) && stream->Read(&ack)) {
      for (int64_t sequence = 1; !stop_; ++sequence) {
        v1::StreamSystemMetricsRequest message;
        v1::SystemMetricsBatch* batch = message.mutable_batch();
        batch->set_sequence(sequence);
        batch->set_agent_id("agent");
        v1::SeriesDeclaration* series = batch->add_series();
        series->set_name("cpu_util");
        series->set_unit("percent");
        v1::SystemMetricsReport* report = batch->add_reports();
        const int64_t now_us = absl::ToUnixMicros(absl::Now());
        report->mutable_time()->set_seconds(now_us / 1000000);
        report->mutable_time()->set_nanos((now_us % 1000000) * 1000);
        report->add_values(double(sequence));
        if (!stream->Write(message) || !stream->Read(&ack)) break;
        acked_ = ack.acked_sequence();
        absl::SleepFor(absl::Milliseconds(200));
      }
    }
    const grpc::Status status = stream->Finish();
    End("StreamSystemMetrics", absl::StrCat(status.error_code(), " ",
                                            status.error_message()),
        status.error_code() == grpc::StatusCode::UNAUTHENTICATED);
  }

  void Follow(int32_t trial, const std::string& token) {
    auto stub = v1::QueryService::NewStub(channel_);
    grpc::ClientContext context;
    context.AddMetadata("authorization", "Bearer " + token);
    context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(60)));
    v1::QuerySeriesRequest request;
    request.set_trial_id(trial);
    auto reader = stub->FollowSeries(&context, request);
    v1::QuerySeriesResponse update;
    while (reader->Read(&update)) {
    }
    const grpc::Status status = reader->Finish();
    End("FollowSeries", absl::StrCat(status.error_code(), " ",
                                     status.error_message()),
        status.error_code() == grpc::StatusCode::UNAUTHENTICATED);
  }

  // curl -N until the server ends the stream (or 60 s pass: curl's 28).
  void Curl(const std::string& url, const std::string& token) {
    absl::StatusOr<std::unique_ptr<Subprocess>> p = Subprocess::Start(
        {"curl", "-sS", "-N", "--max-time", "60", "-H",
         "Authorization: Bearer " + token, url});
    if (!p.ok()) {
      End(url, p.status().ToString(), false);
      return;
    }
    absl::StatusOr<int> code = (*p)->Wait(absl::Seconds(90));
    const std::string out = (*p)->stdout_text() + (*p)->stderr_text();
    // The stream's last line is its error, as every stream's.
    End(url, absl::StrCat("curl exit ", code.ok() ? *code : -1, ": ", out),
        code.ok() && *code == 0 &&
            out.find("{\"error\":{\"code\":16") != std::string::npos);
  }

  const std::shared_ptr<grpc::Channel> channel_;
  std::atomic<bool> stop_{false};
  std::atomic<int64_t> acked_{0};
  absl::Mutex mu_;
  std::map<std::string, Ended> ended_ ABSL_GUARDED_BY(mu_);
  std::vector<std::thread> threads_;
};

TEST_F(SecurityTest, ARevokedOrExpiredTokenEndsEveryOpenStreamOnEveryServer) {
  Metricsd first = Start({});
  Metricsd second = Start({});
  ASSERT_NE(first.grpc_port, 0);
  ASSERT_NE(second.grpc_port, 0);
  storage::pg::PgMetricStoreOptions store;
  store.database_url = db_->url();
  for (int32_t trial : {11, 12}) {
    ASSERT_OK(storage::pg::PgMetricStore::Create(store)->CreateTrial(
        trial, absl::Now() + absl::Seconds(30)));
  }
  const auto new_token = [&](storage::TokenRole role, int32_t trial,
                             std::optional<absl::Duration> ttl) {
    storage::pg::PgTokenStore tokens(db_->url());
    storage::TokenRequest request;
    request.role = role;
    if (trial != 0) request.trial_id = trial;
    request.ttl = ttl;
    absl::StatusOr<storage::CreatedToken> token =
        tokens.Create(request, absl::Now() + absl::Seconds(30));
    EXPECT_OK(token);
    if (!token.ok()) return storage::CreatedToken{};
    secrets_.push_back(token->secret);
    return *token;
  };
  // Revoked: reporter and viewer; expiring: the same with a lifetime long
  // enough for every stream to be open first.
  const storage::CreatedToken reporter =
      new_token(storage::TokenRole::kReporter, 11, std::nullopt);
  const storage::CreatedToken viewer =
      new_token(storage::TokenRole::kViewer, 0, std::nullopt);
  const storage::CreatedToken brief_reporter =
      new_token(storage::TokenRole::kReporter, 12, absl::Seconds(12));
  const storage::CreatedToken brief_viewer =
      new_token(storage::TokenRole::kViewer, 0, absl::Seconds(12));
  const absl::Time expires = absl::Now() + absl::Seconds(12);

  // Each token's streams on both servers.
  std::vector<std::unique_ptr<OpenStreams>> revoked, expired;
  for (const Metricsd* m : {&first, &second}) {
    revoked.push_back(std::make_unique<OpenStreams>(
        m->grpc_port, m->http_port, 11, reporter.secret, viewer.secret));
    expired.push_back(std::make_unique<OpenStreams>(
        m->grpc_port, m->http_port, 12, brief_reporter.secret,
        brief_viewer.secret));
  }
  // Every stream open and the ingest streams acknowledged.
  EXPECT_TRUE(test_util::Eventually(
      [&] {
        for (auto* set : {&revoked, &expired}) {
          for (const auto& s : *set) {
            if (s->acked() < 1) return false;
          }
        }
        return true;
      },
      absl::Seconds(10), absl::Milliseconds(50)));
  for (auto* set : {&revoked, &expired}) {
    for (const auto& s : *set) {
      EXPECT_TRUE(s->ended().empty()) << s->ended().begin()->second.how;
    }
  }

  storage::pg::PgTokenStore tokens(db_->url());
  for (int64_t id : {reporter.token.id, viewer.token.id}) {
    ASSERT_OK(tokens.Revoke(id, absl::Now() + absl::Seconds(30)).status());
  }
  const absl::Time revoked_at = absl::Now();
  const auto all_ended = [](const std::vector<std::unique_ptr<OpenStreams>>& set,
                            absl::Duration within) {
    return test_util::Eventually(
        [&] {
          for (const auto& s : set) {
            if (s->ended().size() < 4) return false;
          }
          return true;
        },
        within, absl::Milliseconds(50));
  };
  // Within --auth-recheck (4 s) and the watch's half-second tick.
  EXPECT_TRUE(all_ended(revoked, revoked_at + absl::Seconds(8) - absl::Now()));
  EXPECT_TRUE(all_ended(expired, expires + absl::Seconds(8) - absl::Now()));
  for (const auto& [set, since] :
       {std::pair(&revoked, revoked_at), std::pair(&expired, expires)}) {
    for (const auto& s : *set) {
      for (const auto& [kind, ended] : s->ended()) {
        EXPECT_TRUE(ended.unauthenticated) << kind << ": " << ended.how;
        const absl::Duration took = ended.at - since;
        std::cerr << "[ ended ] " << kind << " after "
                  << absl::FormatDuration(took) << "\n";
        EXPECT_LT(took, absl::Seconds(5)) << kind;
      }
    }
  }
  revoked.clear();
  expired.clear();
  Stop(first);
  Stop(second);
  ExpectNoTokenIn({first.process.get(), second.process.get()});
}

TEST_F(SecurityTest, AnAddressThatFailsTooOftenIsLimitedOnBothPorts) {
  Metricsd m = Start({"--auth-failure-burst=5", "--auth-failure-refill=3s"});
  ASSERT_NE(m.grpc_port, 0);
  const std::string viewer = CreateToken(storage::TokenRole::kViewer);
  const auto insecure = grpc::InsecureChannelCredentials();
  ASSERT_OK(common::FromGrpcStatus(ListTrials(m.grpc_port, insecure, viewer)));
  const std::string stranger =
      "mtk_" + std::string(64, 'e');  // a token's shape, no token's secret
  // The burst on gRPC, then RESOURCE_EXHAUSTED with the wait.
  for (int i = 0; i < 5; ++i) {
    EXPECT_EQ(ListTrials(m.grpc_port, insecure, stranger).error_code(),
              grpc::StatusCode::UNAUTHENTICATED);
  }
  {
    auto stub = v1::TrialService::NewStub(grpc::CreateChannel(
        absl::StrCat("127.0.0.1:", m.grpc_port), insecure));
    grpc::ClientContext context;
    context.AddMetadata("authorization", "Bearer " + stranger);
    v1::ListTrialsResponse response;
    const grpc::Status limited =
        stub->ListTrials(&context, v1::ListTrialsRequest(), &response);
    EXPECT_EQ(limited.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
    EXPECT_THAT(limited.error_message(),
                HasSubstr("too many failed authentications"));
    auto hint = context.GetServerTrailingMetadata().find("retry-after-ms");
    ASSERT_NE(hint, context.GetServerTrailingMetadata().end());
    int64_t ms = 0;
    EXPECT_TRUE(absl::SimpleAtoi(
        absl::string_view(hint->second.data(), hint->second.size()), &ms));
    EXPECT_GT(ms, 0);
    EXPECT_LE(ms, 3000);
  }
  // The same address is limited on the HTTP port: REST, OTLP and /metrics.
  const std::string base = absl::StrCat("http://127.0.0.1:", m.http_port);
  const auto status_of = [&](const std::string& path,
                             std::vector<std::string> args) {
    std::vector<std::string> all = {"-o", "/dev/null", "-D", "-", "-w",
                                    "status=%{http_code}"};
    all.insert(all.end(), args.begin(), args.end());
    return Curl(base + path, all).second;
  };
  const std::vector<std::string> as_stranger = {
      "-H", "Authorization: Bearer " + stranger};
  for (const char* path : {"/api/v1/trials", "/metrics"}) {
    const std::string out = status_of(path, as_stranger);
    EXPECT_THAT(out, HasSubstr("status=429")) << path;
    EXPECT_THAT(out, HasSubstr("Retry-After: ")) << path;
  }
  std::vector<std::string> otlp = as_stranger;
  otlp.insert(otlp.end(), {"-X", "POST", "-H",
                           "Content-Type: application/json", "-d", "{}"});
  EXPECT_THAT(status_of("/v1/metrics", otlp), HasSubstr("status=429"));
  // A good client behind the same address is not limited; one from
  // another address (127.0.0.2, loopback too) meets no limit.
  EXPECT_OK(common::FromGrpcStatus(ListTrials(m.grpc_port, insecure, viewer)));
  EXPECT_THAT(status_of("/api/v1/trials",
                        {"-H", "Authorization: Bearer " + viewer}),
              HasSubstr("status=200"));
  EXPECT_THAT(status_of("/api/v1/trials", {"--interface", "127.0.0.2", "-H",
                                           "Authorization: Bearer " + stranger}),
              HasSubstr("status=401"));
  // The limit ends after its period: one attempt a refill.
  absl::SleepFor(absl::Seconds(3));
  EXPECT_EQ(ListTrials(m.grpc_port, insecure, stranger).error_code(),
            grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(ListTrials(m.grpc_port, insecure, stranger).error_code(),
            grpc::StatusCode::RESOURCE_EXHAUSTED);
  // What an operator sees: counters, and one log line without the token.
  const std::string scrape =
      Curl(base + "/metrics", {"-H", "Authorization: Bearer " + viewer}).second;
  EXPECT_THAT(scrape, HasSubstr("metricsd_auth_refusals_total{reason=\"limited\"} "));
  EXPECT_THAT(scrape, Not(HasSubstr("metricsd_auth_refusals_total{reason=\"limited\"} 0\n")));
  EXPECT_THAT(scrape, Not(HasSubstr(
                          "metricsd_auth_refusals_total{reason=\"unauthenticated\"} 0\n")));
  Stop(m);
  const std::string log = m.process->stdout_text() + m.process->stderr_text();
  EXPECT_THAT(log, HasSubstr("peer 127.0.0.1 is limited"));
  EXPECT_EQ(log.find("peer 127.0.0.1 is limited"),
            log.rfind("peer 127.0.0.1 is limited"));  // once a minute
  EXPECT_THAT(log, Not(HasSubstr(stranger.substr(4, 32))));
  ExpectNoTokenIn({m.process.get()});
}

}  // namespace
}  // namespace metrics::test_util
