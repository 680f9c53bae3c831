// metricsd's security as processes show it, on a throwaway database with
// certificates made by openssl at run time: TLS on the gRPC and HTTP ports
// (a client trusting the right CA gets through; one trusting another CA,
// or speaking plaintext, does not), mutual TLS refusing a client without a
// certificate while metrics-agent with one reports, no plaintext listening
// beyond loopback with tokens unless asked, clear errors for bad TLS files,
// and a revocation made by metricsctl seen by two metricsd processes on one
// database within 5 seconds. No token ever appears in any process's output.
#include <grpcpp/create_channel.h>
#include <signal.h>

#include <stdlib.h>

#include <filesystem>
#include <fstream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "common/testing/eventually.h"
#include "common/testing/status_matchers.h"
#include "common/grpc_status.h"
#include "common/tls_files.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "proto/metrics/v1/trials.grpc.pb.h"
#include "storage/pg/pg_metric_store.h"
#include "storage/pg/pg_token_store.h"
#include "storage/pg/testing/pg_checks.h"
#include "tests/testing/subprocess.h"
#include "tests/testing/test_certificates.h"
#include "tests/testing/test_database.h"

namespace metrics::test_util {
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
  Stop(m);
  ExpectNoTokenIn({m.process.get(), agent.get()});
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

}  // namespace
}  // namespace metrics::test_util
