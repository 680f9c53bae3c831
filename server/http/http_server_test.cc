#include "server/http/http_server.h"

#include <sys/socket.h>

#include <atomic>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/testing/eventually.h"
#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/http_client.h"

namespace metrics::server {
namespace {

using ::metrics::test_util::HttpCall;
using ::metrics::test_util::StatusIs;
using ::testing::HasSubstr;
using ::testing::Pair;

// Answers with what it received, so tests see what the handler is given.
HttpResponse Echo(const HttpRequest& request) {
  std::vector<std::string> query;
  for (const auto& [k, v] : request.query) query.push_back(k + "=" + v);
  HttpResponse response;
  response.status = 201;
  response.content_type = "text/plain";
  response.headers.emplace_back("X-Echo", "yes");
  response.body = absl::StrCat(request.method, " ", request.path, " ",
                               absl::StrJoin(query, "&"), " ", request.body);
  return response;
}

std::unique_ptr<HttpServer> StartEcho(size_t max_body = 1024) {
  HttpServerOptions options;
  options.address = "127.0.0.1:0";
  options.max_body_bytes = max_body;
  absl::StatusOr<std::unique_ptr<HttpServer>> server =
      HttpServer::Start(options, &Echo);
  EXPECT_OK(server);
  return server.ok() ? *std::move(server) : nullptr;
}

TEST(HttpServerTest, PortZeroBindsAFreePortAndServesRequests) {
  std::unique_ptr<HttpServer> server = StartEcho();
  ASSERT_NE(server, nullptr);
  EXPECT_GT(server->port(), 0);

  ASSERT_OK_AND_ASSIGN(
      auto result,
      HttpCall(server->port(), "POST", "/a/b%20c?x=1&y=two%20words", "hello"));
  EXPECT_EQ(result.status, 201);
  EXPECT_EQ(result.body, "POST /a/b c x=1&y=two words hello");
  EXPECT_THAT(result.headers, ::testing::Contains(Pair("x-echo", "yes")));
  EXPECT_THAT(result.headers,
              ::testing::Contains(Pair("content-type", "text/plain")));
}

// A streamed body ends with chunked encoding's last chunk; one whose
// producer aborts (its source failed after the status went out) ends
// without it, so a client sees a truncated body, never a whole-looking one.
TEST(HttpServerTest, AnAbortedStreamEndsWithoutTheLastChunk) {
  HttpServerOptions options;
  options.address = "127.0.0.1:0";
  absl::StatusOr<std::unique_ptr<HttpServer>> server =
      HttpServer::Start(options, [](const HttpRequest& request) {
        HttpResponse response;
        response.content_type = "text/csv";
        const StreamStep last =
            request.path == "/abort" ? StreamStep::kAbort : StreamStep::kEnd;
        response.stream = [n = 0, last](HttpResponse::Deliver deliver) mutable {
          ++n;
          deliver(n == 1 ? "hello" : " world",
                  n == 1 ? StreamStep::kMore : last);
        };
        return response;
      });
  ASSERT_OK(server);
  ASSERT_OK_AND_ASSIGN(auto whole, HttpCall((*server)->port(), "GET", "/end"));
  EXPECT_EQ(whole.status, 200);
  EXPECT_EQ(whole.body, "5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n");
  ASSERT_OK_AND_ASSIGN(auto cut, HttpCall((*server)->port(), "GET", "/abort"));
  EXPECT_EQ(cut.status, 200);
  EXPECT_EQ(cut.body, "5\r\nhello\r\n6\r\n world\r\n");
  // The server still serves: the abort closed one connection.
  ASSERT_OK_AND_ASSIGN(auto again, HttpCall((*server)->port(), "GET", "/end"));
  EXPECT_EQ(again.status, 200);
}

// Shutdown closes the acceptor while accepts complete on the I/O threads;
// both must go through the acceptor's strand (a race ThreadSanitizer found
// in the thread build, where this test is run).
TEST(HttpServerTest, ShutdownWhileClientsConnectIsClean) {
  for (int round = 0; round < 20; ++round) {
    std::unique_ptr<HttpServer> server = StartEcho();
    ASSERT_NE(server, nullptr);
    const int port = server->port();
    std::atomic<bool> stop{false};
    std::atomic<int> answered{0};
    std::vector<std::thread> clients;
    for (int c = 0; c < 3; ++c) {
      clients.emplace_back([&] {
        while (!stop) {
          if (test_util::HttpCall(port, "GET", "/x", "", absl::Seconds(2)).ok()) {
            ++answered;
          }
        }
      });
    }
    EXPECT_TRUE(test_util::Eventually([&] { return answered >= 3; },
                                      absl::Seconds(30), absl::Milliseconds(1)));
    server->Shutdown();
    stop = true;
    for (std::thread& t : clients) t.join();
    // Once shut down, nothing answers on the port.
    EXPECT_FALSE(test_util::HttpCall(port, "GET", "/x", "", absl::Seconds(2)).ok());
  }
}

TEST(HttpServerTest, OversizedBodyIs413InTheGatewayErrorShape) {
  std::unique_ptr<HttpServer> server = StartEcho(/*max_body=*/10);
  ASSERT_NE(server, nullptr);
  ASSERT_OK_AND_ASSIGN(auto result, HttpCall(server->port(), "POST", "/x",
                                             std::string(100, 'a')));
  EXPECT_EQ(result.status, 413);
  EXPECT_EQ(result.body,
            "{\"code\":3,\"message\":\"request body: larger than the limit of "
            "10 bytes\",\"details\":[]}");
}

TEST(HttpServerTest, ShutdownStopsListening) {
  std::unique_ptr<HttpServer> server = StartEcho();
  ASSERT_NE(server, nullptr);
  const int port = server->port();
  server->Shutdown();
  server->Shutdown();  // idempotent
  EXPECT_THAT(HttpCall(port, "GET", "/"),
              StatusIs(absl::StatusCode::kUnavailable));
}

TEST(HttpServerTest, BadOrBusyAddressesAreClearErrors) {
  HttpServerOptions options;
  options.address = "127.0.0.1";
  EXPECT_THAT(HttpServer::Start(options, &Echo),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("--http-address \"127.0.0.1\": no port")));

  std::unique_ptr<HttpServer> first = StartEcho();
  ASSERT_NE(first, nullptr);
  options.address = absl::StrCat("127.0.0.1:", first->port());
  EXPECT_THAT(HttpServer::Start(options, &Echo),
              StatusIs(absl::StatusCode::kUnavailable,
                       HasSubstr("cannot listen")));
}

TEST(HttpServerTest, ParsesHostPortForms) {
  ASSERT_OK_AND_ASSIGN(auto v4, ParseHostPort("--x", "0.0.0.0:80"));
  EXPECT_EQ(v4, std::make_pair(std::string("0.0.0.0"), 80));
  ASSERT_OK_AND_ASSIGN(auto v6, ParseHostPort("--x", "[::1]:0"));
  EXPECT_EQ(v6, std::make_pair(std::string("::1"), 0));
  EXPECT_THAT(ParseHostPort("--x", "host:99999"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("from 0 to 65535")));
  EXPECT_THAT(ParseHostPort("--x", "[::1"),
              StatusIs(absl::StatusCode::kInvalidArgument));
}

}  // namespace
}  // namespace metrics::server
