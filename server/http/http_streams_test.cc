// Hundreds of streamed answers at once, as a team's open profiler tabs hold
// them: they cost no thread, readers get every piece, clients that never
// read are cut at the write timeout, and health checks answer throughout.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "common/testing/status_matchers.h"
#include "gtest/gtest.h"
#include "server/http/http_server.h"
#include "tests/testing/http_client.h"

namespace metrics::server {
namespace {

constexpr int kPieces = 40;
constexpr auto kTick = absl::Milliseconds(50);

// Publishes one piece per tick to every stream, each handed over only when
// its connection asks for the next (HttpResponse::Stream).
class Feed {
 public:
  struct Stream {
    size_t piece_bytes = 0;
    int next = 1;  // the piece it asks for next
    int asked = 0;  // pieces its connection has asked for
    HttpResponse::Deliver waiting;
  };

  void Tick() {
    absl::MutexLock lock(&mu_);
    ++published_;
    for (auto& [id, stream] : streams_) Offer(stream);
  }

  // A producer for a new stream of `piece_bytes` pieces. Its destruction
  // unregisters it under the lock, so nothing is delivered afterwards.
  HttpResponse::Stream Open(size_t piece_bytes) {
    int id;
    {
      absl::MutexLock lock(&mu_);
      id = next_id_++;
      streams_[id].piece_bytes = piece_bytes;
    }
    struct Registration {
      Registration(Feed* f, int i) : feed(f), id(i) {}
      Feed* const feed;
      const int id;
      ~Registration() {
        absl::MutexLock lock(&feed->mu_);
        feed->asked_[id] = {feed->streams_[id].piece_bytes,
                            feed->streams_[id].asked};
        feed->streams_.erase(id);
      }
    };
    auto registration = std::make_shared<Registration>(this, id);
    return [this, registration](HttpResponse::Deliver deliver) {
      absl::MutexLock lock(&mu_);
      Stream& stream = streams_[registration->id];
      ++stream.asked;
      stream.waiting = std::move(deliver);
      Offer(stream);
    };
  }

  // How many pieces each ended stream's connection asked for, by size.
  std::vector<int> AskedOf(size_t piece_bytes) {
    absl::MutexLock lock(&mu_);
    std::vector<int> out;
    for (const auto& [id, asked] : asked_) {
      if (asked.first == piece_bytes) out.push_back(asked.second);
    }
    return out;
  }

 private:
  void Offer(Stream& stream) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (!stream.waiting || stream.next > published_) return;
    HttpResponse::Deliver deliver = std::move(stream.waiting);
    stream.waiting = nullptr;
    if (stream.next > kPieces) {
      deliver("", StreamStep::kEnd);
      return;
    }
    std::string piece = absl::StrCat("piece ", stream.next, ";");
    piece.resize(stream.piece_bytes, '.');
    ++stream.next;
    deliver(std::move(piece), StreamStep::kMore);
  }

  absl::Mutex mu_;
  int published_ ABSL_GUARDED_BY(mu_) = 0;
  int next_id_ ABSL_GUARDED_BY(mu_) = 0;
  std::map<int, Stream> streams_ ABSL_GUARDED_BY(mu_);
  // Of ended streams: piece size and pieces asked for.
  std::map<int, std::pair<size_t, int>> asked_ ABSL_GUARDED_BY(mu_);
};

int Connect(int port, int receive_buffer) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (receive_buffer > 0) {
    ::setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &receive_buffer,
                 sizeof(receive_buffer));
  }
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<uint16_t>(port));
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) !=
      0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

// The body of a chunked response, and whether its last chunk came.
std::string Dechunk(const std::string& response, bool& complete) {
  complete = false;
  size_t at = response.find("\r\n\r\n");
  if (at == std::string::npos) return "";
  at += 4;
  std::string body;
  while (true) {
    const size_t line_end = response.find("\r\n", at);
    if (line_end == std::string::npos) return body;
    uint64_t size = 0;
    if (!absl::SimpleHexAtoi(response.substr(at, line_end - at), &size)) {
      return body;
    }
    if (size == 0) {
      complete = true;
      return body;
    }
    if (line_end + 2 + size > response.size()) return body;
    body += response.substr(line_end + 2, size);
    at = line_end + 2 + size + 2;
  }
}

int Threads() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("Threads:", 0) == 0) return std::stoi(line.substr(8));
  }
  return -1;
}

TEST(HttpStreamsTest, HundredsOfStreamsHoldNoThreadAndNonReadersAreCut) {
  constexpr int kReaders = 300;
  constexpr int kNonReaders = 30;
  constexpr size_t kSmall = 2 << 10;   // a chart update
  constexpr size_t kLarge = 512 << 10;  // enough to fill socket buffers
  Feed feed;
  HttpServerOptions options;
  options.address = "127.0.0.1:0";
  // Long enough for a reader on a loaded machine (sanitizer builds), short
  // enough for the test.
  options.write_timeout = absl::Seconds(3);
  options.inline_paths = {"/healthz"};
  absl::StatusOr<std::unique_ptr<HttpServer>> started =
      HttpServer::Start(options, [&feed](const HttpRequest& request) {
        HttpResponse response;
        if (request.path == "/healthz") {
          response.body = "ok";
          return response;
        }
        response.content_type = "text/plain";
        response.stream = feed.Open(request.path == "/large" ? kLarge : kSmall);
        return response;
      });
  ASSERT_OK(started);
  const int port = (*started)->port();

  struct Client {
    int fd = -1;
    bool reads = true;
    std::string received;
    bool closed = false;
  };
  std::vector<Client> clients(kReaders + kNonReaders);
  for (int i = 0; i < static_cast<int>(clients.size()); ++i) {
    Client& c = clients[i];
    c.reads = i < kReaders;
    // A client that does not read also offers a small window, as a stalled
    // browser tab's would fill.
    c.fd = Connect(port, c.reads ? 0 : 4096);
    ASSERT_GE(c.fd, 0);
    const std::string request =
        absl::StrCat("GET ", c.reads ? "/small" : "/large",
                     " HTTP/1.1\r\nHost: x\r\n\r\n");
    ASSERT_EQ(::send(c.fd, request.data(), request.size(), MSG_NOSIGNAL),
              static_cast<ssize_t>(request.size()));
  }

  std::atomic<bool> stop{false};
  std::atomic<int> health_failures{0};
  std::atomic<int> health_answers{0};
  std::thread health([&] {
    while (!stop) {
      absl::StatusOr<test_util::HttpResult> answer = test_util::HttpCall(
          port, "GET", "/healthz", "", absl::Seconds(5));
      if (answer.ok() && answer->status == 200) {
        ++health_answers;
      } else {
        ++health_failures;
      }
      absl::SleepFor(absl::Milliseconds(50));
    }
  });
  std::thread ticker([&] {
    for (int i = 0; i <= kPieces && !stop; ++i) {
      feed.Tick();
      absl::SleepFor(kTick);
    }
  });

  // Read the readers until each stream ends (or a generous deadline).
  int most_threads = 0;
  const absl::Time deadline = absl::Now() + absl::Seconds(60);
  int open_readers = kReaders;
  char buffer[64 << 10];
  while (open_readers > 0 && absl::Now() < deadline) {
    std::vector<pollfd> fds;
    std::vector<Client*> polled;
    for (Client& c : clients) {
      if (!c.reads || c.closed) continue;
      fds.push_back({c.fd, POLLIN, 0});
      polled.push_back(&c);
    }
    ::poll(fds.data(), fds.size(), 100);
    for (size_t i = 0; i < fds.size(); ++i) {
      if (fds[i].revents == 0) continue;
      const ssize_t n = ::recv(fds[i].fd, buffer, sizeof(buffer), 0);
      if (n > 0) {
        polled[i]->received.append(buffer, static_cast<size_t>(n));
      }
      bool complete = false;
      Dechunk(polled[i]->received, complete);
      if (n <= 0 || complete) {
        polled[i]->closed = true;
        --open_readers;
      }
    }
    most_threads = std::max(most_threads, Threads());
  }
  // The non-readers have had their bound: let them read what got through.
  absl::SleepFor(options.write_timeout + absl::Seconds(1));
  stop = true;
  ticker.join();
  health.join();

  std::string expected;
  for (int piece = 1; piece <= kPieces; ++piece) {
    std::string text = absl::StrCat("piece ", piece, ";");
    text.resize(kSmall, '.');
    expected += text;
  }
  int readers_whole = 0;
  for (int i = 0; i < kReaders; ++i) {
    bool complete = false;
    const std::string body = Dechunk(clients[i].received, complete);
    if (complete && body == expected) ++readers_whole;
    ::close(clients[i].fd);
  }
  EXPECT_EQ(readers_whole, kReaders) << "readers that got every piece";

  // A non-reader's connection was closed by the server: reading it to the
  // end finds no last chunk, and the server asked its producer for only as
  // much as the socket took (it never queues pieces for it).
  int cut = 0;
  for (int i = kReaders; i < kReaders + kNonReaders; ++i) {
    timeval timeout{5, 0};
    ::setsockopt(clients[i].fd, SOL_SOCKET, SO_RCVTIMEO, &timeout,
                 sizeof(timeout));
    std::string received;
    while (true) {
      const ssize_t n = ::recv(clients[i].fd, buffer, sizeof(buffer), 0);
      if (n <= 0) break;
      received.append(buffer, static_cast<size_t>(n));
    }
    bool complete = false;
    Dechunk(received, complete);
    if (!complete) ++cut;
    ::close(clients[i].fd);
  }
  EXPECT_EQ(cut, kNonReaders) << "non-readers cut at the write timeout";
  const std::vector<int> asked = feed.AskedOf(kLarge);
  EXPECT_EQ(asked.size(), static_cast<size_t>(kNonReaders));
  for (int a : asked) EXPECT_LT(a, kPieces) << "pieces asked of a non-reader";

  EXPECT_GT(health_answers, 10);
  EXPECT_EQ(health_failures, 0) << "/healthz unanswered within 5 s";
  // Streams hold no thread: the server's few threads, the test's three.
  EXPECT_LT(most_threads, 64) << "threads while " << kReaders + kNonReaders
                              << " streams were open";
}

// Clients that leave while their streams' pieces are being written, again
// and again: the server drops their streams and goes on serving.
TEST(HttpStreamsTest, ClientsLeavingMidStreamLeaveTheServerServing) {
  HttpServerOptions options;
  options.address = "127.0.0.1:0";
  options.inline_paths = {"/healthz"};
  // Each stream's producer hands a piece over at once, so writes are
  // always in flight when a client leaves.
  absl::StatusOr<std::unique_ptr<HttpServer>> started =
      HttpServer::Start(options, [&](const HttpRequest& request) {
        HttpResponse response;
        if (request.path == "/healthz") {
          response.body = "ok";
          return response;
        }
        response.stream = [](HttpResponse::Deliver deliver) {
          deliver(std::string(8 << 10, 'x'), StreamStep::kMore);
        };
        return response;
      });
  ASSERT_OK(started);
  const int port = (*started)->port();
  char buffer[4096];
  for (int round = 0; round < 5; ++round) {
    std::vector<int> fds;
    for (int i = 0; i < 100; ++i) {
      const int fd = Connect(port, 0);
      ASSERT_GE(fd, 0);
      const std::string request = "GET /s HTTP/1.1\r\nHost: x\r\n\r\n";
      ::send(fd, request.data(), request.size(), MSG_NOSIGNAL);
      fds.push_back(fd);
    }
    for (int fd : fds) ASSERT_GT(::recv(fd, buffer, sizeof(buffer), 0), 0);
    for (int fd : fds) ::close(fd);  // unread bytes: a reset, mid-write
    ASSERT_OK_AND_ASSIGN(test_util::HttpResult health,
                         test_util::HttpCall(port, "GET", "/healthz"));
    EXPECT_EQ(health.status, 200) << "round " << round;
  }
  (*started)->Shutdown();
}

}  // namespace
}  // namespace metrics::server
