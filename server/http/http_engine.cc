#include "server/http/http_engine.h"

#include <boost/asio/bind_executor.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/strand.hpp>
#include <chrono>

namespace metrics::server::server_internal {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;

HttpEngine::HttpEngine(HttpServerOptions options, HttpServer::Handler handler,
                       int fd, bool ipv6,
                       std::unique_ptr<asio::ssl::context> tls)
    : options_(std::move(options)),
      handler_(std::move(handler)),
      tls_(std::move(tls)),
      accept_strand_(asio::make_strand(io_)),
      acceptor_(accept_strand_),
      accept_retry_(accept_strand_),
      work_(asio::make_work_guard(io_)),
      handler_pool_(options_.handler_threads, options_.max_queued_requests) {
  acceptor_.assign(ipv6 ? tcp::v6() : tcp::v4(), fd);
  Accept();
  for (int i = 0; i < options_.io_threads; ++i) {
    io_threads_.emplace_back([this] { io_.run(); });
  }
}

HttpEngine::~HttpEngine() { Shutdown(); }

void HttpEngine::Accept() {
  // The new socket gets a strand of its own; the completion runs on the
  // acceptor's.
  acceptor_.async_accept(
      asio::make_strand(io_),
      asio::bind_executor(
          accept_strand_,
          [this](boost::system::error_code ec, tcp::socket socket) {
            OnAccept(ec, std::move(socket));
          }));
}

void HttpEngine::OnAccept(boost::system::error_code ec, tcp::socket socket) {
  if (ec == asio::error::operation_aborted || !acceptor_.is_open()) return;
  if (ec) {
    // Out of descriptors (or a connection reset before it was taken): try
    // again shortly rather than spin.
    accept_retry_.expires_after(std::chrono::milliseconds(100));
    accept_retry_.async_wait([this](boost::system::error_code wait_ec) {
      if (!wait_ec) Accept();
    });
    return;
  }
  std::shared_ptr<Session> session;
  std::shared_ptr<Session> evict;
  // Sessions looked at are released after the lock: a last reference would
  // unregister, which takes the lock.
  std::vector<std::shared_ptr<Session>> seen;
  bool busy = false;
  {
    absl::MutexLock lock(&mu_);
    if (stopped_) return;
    if (sessions_.size() >= static_cast<size_t>(options_.max_connections)) {
      int64_t oldest = INT64_MAX;
      for (const auto& [id, weak] : sessions_) {
        std::shared_ptr<Session> s = weak.lock();
        if (s != nullptr && s->waiting() && s->waiting_since() < oldest) {
          oldest = s->waiting_since();
          evict = s;
        }
        seen.push_back(std::move(s));
      }
      busy = evict == nullptr;
    }
    session = std::make_shared<Session>(*this, std::move(socket), next_id_);
    sessions_[next_id_++] = session;
  }
  if (evict != nullptr) evict->Evict();
  if (busy) {
    session->RejectBusy();
  } else {
    session->Start();
  }
  Accept();
}

bool HttpEngine::AcquireStream() {
  if (streams_.fetch_add(1) < options_.max_streams) return true;
  streams_.fetch_sub(1);
  return false;
}

void HttpEngine::ReleaseStream() { streams_.fetch_sub(1); }

void HttpEngine::Unregister(uint64_t id) {
  absl::MutexLock lock(&mu_);
  sessions_.erase(id);
}

void HttpEngine::Shutdown() {
  std::vector<std::shared_ptr<Session>> open;
  {
    absl::MutexLock lock(&mu_);
    if (stopped_) return;
    stopped_ = true;
    for (const auto& [id, weak] : sessions_) {
      if (std::shared_ptr<Session> s = weak.lock())
        open.push_back(std::move(s));
    }
  }
  asio::post(accept_strand_, [this] {
    boost::system::error_code ignored;
    acceptor_.close(ignored);
    accept_retry_.cancel();
  });
  for (const std::shared_ptr<Session>& s : open) s->Close();
  open.clear();
  // Handlers still running finish (their answers go nowhere), then the I/O
  // threads stop; what is left of the sessions goes with the I/O context.
  handler_pool_.Shutdown();
  work_.reset();
  io_.stop();
  for (std::thread& t : io_threads_) t.join();
  io_threads_.clear();
  // The closes posted above may not have run before the stop: run what is
  // pending once more, on this thread alone now.
  io_.restart();
  io_.poll();
  boost::system::error_code ignored;
  acceptor_.close(ignored);
}

}  // namespace metrics::server::server_internal
