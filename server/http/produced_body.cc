#include "server/http/produced_body.h"

#include <algorithm>
#include <utility>

namespace metrics::server {

std::shared_ptr<ProducedBody> ProducedBody::Start(Produce produce, size_t max_queued) {
  std::shared_ptr<ProducedBody> body(new ProducedBody(std::max<size_t>(1, max_queued)));
  ProducedBody* raw = body.get();
  raw->producer_ = std::thread([raw, produce = std::move(produce)] {
    const absl::Status result =
        produce([raw](std::string chunk) { return raw->Put(std::move(chunk)); });
    absl::MutexLock lock(&raw->mu_);
    raw->result_ = result;
    raw->done_ = true;
  });
  return body;
}

ProducedBody::~ProducedBody() {
  {
    absl::MutexLock lock(&mu_);
    gone_ = true;
  }
  if (producer_.joinable()) producer_.join();
}

absl::Status ProducedBody::Put(std::string chunk) {
  absl::MutexLock lock(&mu_);
  mu_.Await(absl::Condition(
      +[](ProducedBody* b) ABSL_EXCLUSIVE_LOCKS_REQUIRED(b->mu_) {
        return b->gone_ || b->queue_.size() < b->max_queued_;
      },
      this));
  if (gone_) return absl::CancelledError("the client left");
  if (chunk.empty()) return absl::OkStatus();
  queue_.push_back(std::move(chunk));
  emitted_ = true;
  return absl::OkStatus();
}

absl::Status ProducedBody::AwaitStart() {
  absl::MutexLock lock(&mu_);
  mu_.Await(absl::Condition(
      +[](ProducedBody* b) ABSL_EXCLUSIVE_LOCKS_REQUIRED(b->mu_) {
        return b->emitted_ || b->done_;
      },
      this));
  return emitted_ ? absl::OkStatus() : result_;
}

StreamStep ProducedBody::Pull(std::string& chunk) {
  absl::MutexLock lock(&mu_);
  mu_.Await(absl::Condition(
      +[](ProducedBody* b) ABSL_EXCLUSIVE_LOCKS_REQUIRED(b->mu_) {
        return !b->queue_.empty() || b->done_;
      },
      this));
  if (!queue_.empty()) {
    chunk = std::move(queue_.front());
    queue_.pop_front();
    if (!queue_.empty() || !done_) return StreamStep::kMore;
  }
  return result_.ok() ? StreamStep::kEnd : StreamStep::kAbort;
}

HttpResponse::Stream ProducedBody::AsStream(std::shared_ptr<ProducedBody> body) {
  return [body = std::move(body)](std::string& chunk) { return body->Pull(chunk); };
}

}  // namespace metrics::server
