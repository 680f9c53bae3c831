// Authentication and authorization through the real server (--auth=required
// in-process, real PostgreSQL): every gRPC method of the served proto files
// and every REST route of the route table, each with no token, a malformed,
// unknown, expired and revoked one, and tokens of each role (in
// "authorization", and a reporter's in the platform harness's
// "x-allocation-token"; two that disagree fail), must answer as its access
// rule says. Methods and routes come from the descriptors, so
// one added later is in the matrix. Also: a revocation through another
// store is seen within the recheck time, and /metrics needs a token.
#include <google/protobuf/descriptor.h>
#include <google/protobuf/message.h>
#include <grpcpp/client_context.h>
#include <grpcpp/completion_queue.h>
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/impl/codegen/proto_utils.h>
#include <grpcpp/support/byte_buffer.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "common/testing/eventually.h"
#include "common/testing/status_matchers.h"
#include "common/testing/test_time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "proto/determined/api/v1/profiler.pb.h"
#include "proto/metrics/v1/ingest.pb.h"
#include "proto/metrics/v1/query.pb.h"
#include "proto/metrics/v1/tokens.grpc.pb.h"
#include "proto/metrics/v1/trials.pb.h"
#include "server/auth/access_rules.h"
#include "server/auth/testing/served_protos.h"
#include "server/rest/http_routes.h"
#include "storage/pg/pg_metric_store.h"
#include "storage/pg/pg_token_store.h"
#include "tests/testing/http_client.h"
#include "tests/testing/test_server.h"

namespace metrics::server {
namespace {

using google::protobuf::Message;
using google::protobuf::MethodDescriptor;
using ::metrics::test_util::HttpCall;
using ::metrics::test_util::TestServer;
using storage::TokenRole;
using test_util::FullName;
using test_util::NewRequest;
using test_util::ServedMethods;
using test_util::ServedProtoFiles;
using test_util::SetInt32At;

constexpr int32_t kMatrixTrial = 7;
constexpr int32_t kOtherTrial = 8;

using ::metrics::test_util::Deadline;

// The credentials of one row of the matrix.
struct Caller {
  std::string name;
  std::string authorization;  // the header's value; "" sends none
  // The platform harness's header (gRPC metadata x-allocation-token; HTTP
  // Grpc-Metadata-x-allocation-token); "" sends none.
  std::string allocation_token;
  // Who it is, when the token is good; unset: it must not authenticate.
  std::optional<Principal> principal;
};

// A request of `method` naming trial `trial` where its rule looks.
std::unique_ptr<Message> RequestFor(const MethodDescriptor* method,
                                    int32_t trial) {
  std::unique_ptr<Message> request = NewRequest(method);
  const MethodRule* rule = RuleFor(FullName(method));
  if (rule != nullptr && !rule->trial_paths.empty()) {
    EXPECT_TRUE(SetInt32At(*request, rule->trial_paths[0], trial));
  }
  if (auto* open =
          dynamic_cast<v1::StreamSystemMetricsRequest*>(request.get())) {
    open->mutable_open()->set_stream_id("matrix");
  }
  return request;
}

// One call of any shape through the generic stub: the request is sent
// (the only message of a stream), the client half-closes, every answer is
// read. Calls that would go on (follow) end at the deadline.
grpc::Status CallGeneric(const std::shared_ptr<grpc::Channel>& channel,
                         const std::string& method, const Message& request,
                         const std::string& authorization,
                         absl::Duration timeout,
                         const std::string& allocation_token = "") {
  grpc::GenericStub stub(channel);
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + timeout));
  if (!authorization.empty())
    context.AddMetadata("authorization", authorization);
  if (!allocation_token.empty())
    context.AddMetadata("x-allocation-token", allocation_token);
  grpc::CompletionQueue queue;
  std::unique_ptr<grpc::GenericClientAsyncReaderWriter> call =
      stub.PrepareCall(&context, method, &queue);
  void* tag;
  bool ok;
  auto step = [&](int id) {
    EXPECT_TRUE(queue.Next(&tag, &ok));
    EXPECT_EQ(tag, reinterpret_cast<void*>(id));
    return ok;
  };
  call->StartCall(reinterpret_cast<void*>(1));
  bool open = step(1);
  grpc::ByteBuffer buffer;
  bool own_buffer = false;
  grpc::Status serialized = grpc::SerializationTraits<Message>::Serialize(
      request, &buffer, &own_buffer);
  EXPECT_TRUE(serialized.ok());
  if (open) {
    call->Write(buffer, reinterpret_cast<void*>(2));
    open = step(2);
  }
  if (open) {
    call->WritesDone(reinterpret_cast<void*>(3));
    step(3);
  }
  grpc::ByteBuffer answer;
  while (open) {
    call->Read(&answer, reinterpret_cast<void*>(4));
    open = step(4);
  }
  grpc::Status status;
  call->Finish(&status, reinterpret_cast<void*>(5));
  step(5);
  queue.Shutdown();
  while (queue.Next(&tag, &ok)) {
  }
  return status;
}

// The caller's HTTP header lines.
std::string HeaderLines(const Caller& caller) {
  std::string lines;
  if (!caller.authorization.empty()) {
    absl::StrAppend(&lines, "Authorization: ", caller.authorization, "\r\n");
  }
  if (!caller.allocation_token.empty()) {
    absl::StrAppend(&lines, "Grpc-Metadata-x-allocation-token: ",
                    caller.allocation_token, "\r\n");
  }
  return lines;
}

bool Allowed(const Caller& caller, const std::string& method,
             const Message& request) {
  if (!caller.principal) return false;
  const MethodRule* rule = RuleFor(method);
  return rule != nullptr &&
         Authorize(*caller.principal, method, *rule, request, true).ok();
}

class AuthMatrixTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    ServerOptions options;
    options.auth_required = true;
    options.auth_recheck = absl::Seconds(1);
    // The rules, not the per-address limit (security_test.cc tries that):
    // the matrix's strangers fail far more often than its burst.
    options.auth_failure_burst = 0;
    auto server = TestServer::Start(options);
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = server->release();
    storage::pg::PgMetricStoreOptions store_options;
    store_options.database_url = server_->database_url();
    auto trials = storage::pg::PgMetricStore::Create(store_options);
    ASSERT_TRUE(trials->CreateTrial(kMatrixTrial, Deadline()).ok());
    ASSERT_TRUE(trials->CreateTrial(kOtherTrial, Deadline()).ok());
    tokens_ = new storage::pg::PgTokenStore(server_->database_url());

    callers_ = new std::vector<Caller>();
    auto add = [](const std::string& name, TokenRole role,
                  std::optional<int32_t> trial,
                  std::optional<absl::Duration> ttl = std::nullopt) {
      storage::TokenRequest request;
      request.name = name;
      request.role = role;
      request.trial_id = trial;
      request.ttl = ttl;
      auto created = tokens_->Create(request, Deadline());
      EXPECT_TRUE(created.ok()) << created.status();
      return *created;
    };
    const auto admin = add("admin", TokenRole::kAdmin, std::nullopt);
    const auto viewer = add("viewer", TokenRole::kViewer, std::nullopt);
    const auto reporter = add("reporter", TokenRole::kReporter, kMatrixTrial);
    const auto other = add("other", TokenRole::kReporter, kOtherTrial);
    const auto expired =
        add("expired", TokenRole::kAdmin, std::nullopt, absl::Milliseconds(1));
    const auto revoked = add("revoked", TokenRole::kAdmin, std::nullopt);
    ASSERT_TRUE(tokens_->Revoke(revoked.token.id, Deadline()).ok());
    std::string unknown = admin.secret;
    unknown.back() = unknown.back() == '0' ? '1' : '0';
    auto principal = [](const storage::CreatedToken& t) {
      return Principal{t.token.id, t.token.role, t.token.trial_id};
    };
    *callers_ = {
        {"no token", "", "", std::nullopt},
        {"malformed", "Bearer not-a-token", "", std::nullopt},
        {"unknown", "Bearer " + unknown, "", std::nullopt},
        {"expired", "Bearer " + expired.secret, "", std::nullopt},
        {"revoked", "Bearer " + revoked.secret, "", std::nullopt},
        {"admin", "Bearer " + admin.secret, "", principal(admin)},
        {"viewer", "Bearer " + viewer.secret, "", principal(viewer)},
        {"reporter of the trial", "Bearer " + reporter.secret, "",
         principal(reporter)},
        {"reporter of another trial", "Bearer " + other.secret, "",
         principal(other)},
        {"reporter of the trial, as a task's session", "",
         "Bearer " + reporter.secret, principal(reporter)},
        {"two tokens that disagree", "Bearer " + admin.secret,
         "Bearer " + viewer.secret, std::nullopt},
    };
  }

  static void TearDownTestSuite() {
    delete callers_;
    delete tokens_;
    delete server_;
  }

  static TestServer* server_;
  static storage::pg::PgTokenStore* tokens_;
  static std::vector<Caller>* callers_;
};

TestServer* AuthMatrixTest::server_ = nullptr;
storage::pg::PgTokenStore* AuthMatrixTest::tokens_ = nullptr;
std::vector<Caller>* AuthMatrixTest::callers_ = nullptr;

TEST_F(AuthMatrixTest, EveryGrpcMethodAnswersAsItsRuleSays) {
  std::shared_ptr<grpc::Channel> channel = server_->Channel();
  int cells = 0;
  for (const MethodDescriptor* method : ServedMethods()) {
    const std::string name = FullName(method);
    // Trial-ending calls last, so the trial stays active for the rest.
    if (method->name() == "UpdateTrial") continue;
    std::unique_ptr<Message> request = RequestFor(method, kMatrixTrial);
    for (const Caller& caller : *callers_) {
      const grpc::Status status =
          CallGeneric(channel, name, *request, caller.authorization,
                      absl::Seconds(2), caller.allocation_token);
      const std::string cell =
          absl::StrCat(name, " by ", caller.name, ": ", status.error_code(),
                       " ", status.error_message());
      if (!caller.principal) {
        EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAUTHENTICATED)
            << cell;
        EXPECT_EQ(status.error_message(),
                  "a valid API token is required: send "
                  "\"authorization: Bearer <token>\"")
            << cell;
      } else if (Allowed(caller, name, *request)) {
        EXPECT_NE(status.error_code(), grpc::StatusCode::UNAUTHENTICATED)
            << cell;
        EXPECT_NE(status.error_code(), grpc::StatusCode::PERMISSION_DENIED)
            << cell;
      } else {
        EXPECT_EQ(status.error_code(), grpc::StatusCode::PERMISSION_DENIED)
            << cell;
      }
      EXPECT_THAT(status.error_message(),
                  ::testing::Not(::testing::HasSubstr("mtk_")))
          << cell;
      ++cells;
    }
  }
  EXPECT_EQ(cells, 20 * 11);
}

TEST_F(AuthMatrixTest, EveryRestRouteAnswersAsItsRuleSays) {
  std::vector<const google::protobuf::ServiceDescriptor*> services;
  for (const auto* file : ServedProtoFiles()) {
    for (int s = 0; s < file->service_count(); ++s) {
      services.push_back(file->service(s));
    }
  }
  absl::StatusOr<RouteTable> table = RouteTable::Build(services);
  ASSERT_TRUE(table.ok()) << table.status();
  int cells = 0, routes = 0;
  for (const Route& route : table->routes()) {
    const std::string name = FullName(route.method);
    if (route.method->name() == "UpdateTrial") continue;
    ++routes;
    std::string path;
    for (const Route::Segment& segment : route.segments) {
      absl::StrAppend(&path, "/",
                      segment.variable ? absl::StrCat(kMatrixTrial) : segment.text);
    }
    // Summaries and GetMetrics name their trials in the query string.
    if (route.method->name() == "SummarizeSeries") {
      absl::StrAppend(&path, "?trialId=", kMatrixTrial);
    }
    if (route.method->name() == "GetMetrics") {
      absl::StrAppend(&path, "?trialIds=", kMatrixTrial, "&group=training");
    }
    std::unique_ptr<Message> request = RequestFor(route.method, kMatrixTrial);
    // A body naming the trial where the rule looks (the path does too).
    std::string body = route.body.empty() ? "" : "{}";
    if (route.method->name() == "PostTrialProfilerMetricsBatch") {
      body =
          absl::StrCat(R"({"batches":[{"labels":{"trialId":)", kMatrixTrial, "}}]}");
    }
    for (const Caller& caller : *callers_) {
      const std::string header = HeaderLines(caller);
      absl::StatusOr<::metrics::test_util::HttpResult> result =
          HttpCall(server_->http_port(), route.http_method, path, body,
                   absl::Seconds(5), header);
      const std::string cell =
          absl::StrCat(route.http_method, " ", path, " by ", caller.name);
      if (!result.ok()) {
        // A follow that is allowed goes on until the client leaves.
        EXPECT_EQ(result.status().code(), absl::StatusCode::kDeadlineExceeded)
            << cell << ": " << result.status();
        EXPECT_TRUE(Allowed(caller, name, *request)) << cell;
        ++cells;
        continue;
      }
      if (!caller.principal) {
        EXPECT_EQ(result->status, 401) << cell << ": " << result->body;
        EXPECT_EQ(result->headers["www-authenticate"], "Bearer") << cell;
      } else if (Allowed(caller, name, *request)) {
        EXPECT_NE(result->status, 401) << cell << ": " << result->body;
        EXPECT_NE(result->status, 403) << cell << ": " << result->body;
      } else {
        EXPECT_EQ(result->status, 403) << cell << ": " << result->body;
      }
      ++cells;
    }
  }
  // Every annotated route but UpdateTrial's (the stream has none).
  EXPECT_EQ(routes, 18);
  EXPECT_EQ(cells, routes * 11);
}

TEST_F(AuthMatrixTest, UpdateTrialIsForAdminsOnly) {
  const std::string kUpdate = "/metrics.v1.TrialService/UpdateTrial";
  v1::UpdateTrialRequest request;
  request.set_trial_id(kOtherTrial);
  request.set_state(v1::Trial::COMPLETED);
  std::shared_ptr<grpc::Channel> channel = server_->Channel();
  for (const Caller& caller : *callers_) {
    if (caller.principal && caller.principal->role == TokenRole::kAdmin) {
      continue;  // last, below
    }
    grpc::Status status =
        CallGeneric(channel, kUpdate, request, caller.authorization,
                    absl::Seconds(5), caller.allocation_token);
    EXPECT_EQ(status.error_code(), caller.principal
                                       ? grpc::StatusCode::PERMISSION_DENIED
                                       : grpc::StatusCode::UNAUTHENTICATED)
        << caller.name;
  }
  grpc::Status status =
      CallGeneric(channel, kUpdate, request, (*callers_)[5].authorization,
                  absl::Seconds(5));
  EXPECT_TRUE(status.ok()) << status.error_message();
}

// A summary of several trials is allowed only where every one is: a viewer
// compares any runs, a reporter none beside its own.
TEST_F(AuthMatrixTest, ASummaryOfSeveralTrialsIsCheckedOnEachOfThem) {
  const std::string path = absl::StrCat("/api/v1/metrics/system/summary?trialId=", kMatrixTrial,
                                        "&trialId=", kOtherTrial);
  for (const Caller& caller : *callers_) {
    if (!caller.principal) continue;
    const std::string header = HeaderLines(caller);
    absl::StatusOr<::metrics::test_util::HttpResult> both =
        HttpCall(server_->http_port(), "GET", path, "", absl::Seconds(5), header);
    ASSERT_TRUE(both.ok()) << caller.name << ": " << both.status();
    const bool reporter = caller.principal->role == TokenRole::kReporter;
    EXPECT_EQ(both->status, reporter ? 403 : 200) << caller.name << ": " << both->body;
    if (reporter) {
      EXPECT_THAT(both->body, ::testing::HasSubstr("may not call QueryService.SummarizeSeries for trial"))
          << caller.name;
    }
  }
}

TEST_F(AuthMatrixTest, HealthIsOpenAndMetricsNeedAReader) {
  absl::StatusOr<::metrics::test_util::HttpResult> health =
      HttpCall(server_->http_port(), "GET", "/healthz");
  ASSERT_TRUE(health.ok());
  EXPECT_EQ(health->status, 200);
  absl::StatusOr<::metrics::test_util::HttpResult> metrics =
      HttpCall(server_->http_port(), "GET", "/metrics");
  ASSERT_TRUE(metrics.ok());
  EXPECT_EQ(metrics->status, 401);
  for (const Caller& caller : *callers_) {
    if (!caller.principal) continue;
    metrics = HttpCall(server_->http_port(), "GET", "/metrics", "",
                       absl::Seconds(10), HeaderLines(caller));
    ASSERT_TRUE(metrics.ok());
    EXPECT_EQ(metrics->status,
              caller.principal->role == TokenRole::kReporter ? 403 : 200)
        << caller.name << ": " << metrics->body;
  }
}

TEST_F(AuthMatrixTest, ARevocationIsSeenWithinTheRecheckTime) {
  storage::TokenRequest request;
  request.role = TokenRole::kViewer;
  auto created = tokens_->Create(request, Deadline());
  ASSERT_TRUE(created.ok());
  const std::string header = "Bearer " + created->secret;
  v1::ListTrialsRequest list;
  std::shared_ptr<grpc::Channel> channel = server_->Channel();
  const std::string kList = "/metrics.v1.TrialService/ListTrials";
  ASSERT_TRUE(CallGeneric(channel, kList, list, header, absl::Seconds(5)).ok());
  // Revoked through another connection, as another metricsd would.
  storage::pg::PgTokenStore elsewhere(server_->database_url());
  ASSERT_TRUE(elsewhere.Revoke(created->token.id, Deadline()).ok());
  const absl::Time revoked = absl::Now();
  grpc::Status status;
  ::metrics::test_util::Eventually(
      [&] {
        status = CallGeneric(channel, kList, list, header, absl::Seconds(5));
        return !status.ok();
      },
      absl::Seconds(10), absl::Milliseconds(100));
  EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAUTHENTICATED);
  // The server was started with a 1 s recheck.
  EXPECT_LT(absl::Now() - revoked, absl::Seconds(2));
}

TEST_F(AuthMatrixTest, AnAdminMintsAReporterTokenThatWorksForItsTrialOnly) {
  std::shared_ptr<grpc::Channel> channel = server_->Channel();
  auto tokens = v1::TokenService::NewStub(channel);
  grpc::ClientContext context;
  context.AddMetadata("authorization", (*callers_)[5].authorization);
  v1::CreateTokenRequest create;
  create.set_role(v1::ApiToken::REPORTER);
  create.set_trial_id(kMatrixTrial);
  create.set_name("agents of 7");
  create.set_ttl_seconds(3600);
  v1::CreateTokenResponse created;
  grpc::Status status = tokens->CreateToken(&context, create, &created);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(created.token().trial_id(), kMatrixTrial);
  EXPECT_TRUE(created.token().has_expires_at());

  v1::ReportSystemMetricsRequest report;
  report.mutable_batch()->set_trial_id(kMatrixTrial);
  const std::string kReport = "/metrics.v1.IngestService/ReportSystemMetrics";
  const std::string bearer = "Bearer " + created.secret();
  // Allowed (the empty batch is then refused for its content).
  EXPECT_EQ(CallGeneric(channel, kReport, report, bearer, absl::Seconds(5))
                .error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
  report.mutable_batch()->set_trial_id(kOtherTrial);
  EXPECT_EQ(CallGeneric(channel, kReport, report, bearer, absl::Seconds(5))
                .error_code(),
            grpc::StatusCode::PERMISSION_DENIED);

  // The list never carries a secret.
  grpc::ClientContext list_context;
  list_context.AddMetadata("authorization", (*callers_)[5].authorization);
  v1::ListTokensResponse list;
  ASSERT_TRUE(tokens->ListTokens(&list_context, {}, &list).ok());
  EXPECT_THAT(list.DebugString(),
              ::testing::Not(::testing::HasSubstr(created.secret())));

  // Bad requests name the field.
  grpc::ClientContext bad_context;
  bad_context.AddMetadata("authorization", (*callers_)[5].authorization);
  create.set_role(v1::ApiToken::VIEWER);
  status = tokens->CreateToken(&bad_context, create, &created);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(status.error_message(),
              ::testing::HasSubstr("trial: only reporter tokens"));
  grpc::ClientContext huge_context;
  huge_context.AddMetadata("authorization", (*callers_)[5].authorization);
  create.set_role(v1::ApiToken::REPORTER);
  create.set_ttl_seconds(INT64_MAX);
  status = tokens->CreateToken(&huge_context, create, &created);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(status.error_message(), ::testing::HasSubstr("ttl: "));
}

TEST_F(AuthMatrixTest, HostileAuthorizationHeadersAreRefusedCleanly) {
  const std::string good = (*callers_)[5].authorization;  // the admin's
  for (const std::string& value :
       {std::string("Bearer \xff\xfe"), std::string("Bearer \x01\x02"),
        std::string("Bearer ") + std::string(10000, 'a'),
        std::string("bearer") + std::string(64, ' '), good + "\xc3\x28",
        std::string("Basic YWRtaW46YWRtaW4=")}) {
    absl::StatusOr<::metrics::test_util::HttpResult> result = HttpCall(
        server_->http_port(), "GET", "/api/v1/trials", "", absl::Seconds(10),
        absl::StrCat("Authorization: ", value, "\r\n"));
    ASSERT_TRUE(result.ok()) << result.status();
    // Refused by the HTTP layer (400, 431) or as a bad token (401); never
    // served, and the server goes on.
    EXPECT_TRUE(result->status == 400 || result->status == 401 ||
                result->status == 431)
        << result->status << " " << result->body;
  }
  absl::StatusOr<::metrics::test_util::HttpResult> ok = HttpCall(
      server_->http_port(), "GET", "/api/v1/trials", "", absl::Seconds(10),
      absl::StrCat("Authorization: ", good, "\r\n"));
  ASSERT_TRUE(ok.ok());
  EXPECT_EQ(ok->status, 200) << ok->body;
}

TEST(TokenServiceWithoutAuthTest, RefusesEveryCall) {
  auto server = TestServer::Start();
  ASSERT_TRUE(server.ok()) << server.status();
  auto tokens = v1::TokenService::NewStub((*server)->Channel());
  grpc::ClientContext context;
  v1::CreateTokenRequest create;
  create.set_role(v1::ApiToken::ADMIN);
  v1::CreateTokenResponse created;
  grpc::Status status = tokens->CreateToken(&context, create, &created);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_THAT(status.error_message(), ::testing::HasSubstr("--auth=required"));
  storage::pg::PgTokenStore store((*server)->database_url());
  auto all = store.List(Deadline());
  ASSERT_TRUE(all.ok());
  EXPECT_TRUE(all->empty());
}

}  // namespace
}  // namespace metrics::server
