#include "server/rest/gateway_stream.h"

#include <grpcpp/support/client_callback.h>

#include <algorithm>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "common/grpc_status.h"
#include "common/presented_credential.h"

namespace metrics::server {

void ForwardCaller(const HttpRequest& request, absl::Duration timeout,
                   grpc::ClientContext& context) {
  if (timeout > absl::ZeroDuration()) {
    context.set_deadline(absl::ToChronoTime(absl::Now() + timeout));
  }
  context.AddMetadata("x-forwarded-for", request.client_address);
  // The caller's credentials, as gRPC clients send them: "authorization",
  // and the platform's allocation token header as its gRPC metadata. gRPC
  // takes only printable ASCII in metadata, and a long value would pass its
  // metadata limit and break the gateway's connection (measured: "Broken
  // pipe" for 10 000 bytes). Neither can be a token (75 bytes with its
  // scheme), so such a value is replaced by one that fails like any bad
  // token.
  for (const auto& [header, key] :
       {std::pair<absl::string_view, absl::string_view>("authorization",
                                                         "authorization"),
        {common::kAllocationTokenHeader, common::kAllocationTokenMetadata}}) {
    const absl::string_view value = request.Header(header);
    if (value.empty()) continue;
    constexpr size_t kMaxCredentialBytes = 1024;
    const bool usable = value.size() <= kMaxCredentialBytes &&
                        std::all_of(value.begin(), value.end(), [](char c) {
                          return c >= 0x20 && c < 0x7f;
                        });
    context.AddMetadata(std::string(key),
                        usable ? std::string(value) : std::string("invalid"));
  }
}

namespace gateway_internal {

// gRPC may run a reaction on the thread that starts an operation, before
// the start returns: operations start with mu_ released. Callbacks run
// under mu_, so that once the handle has let go none runs.
class StreamReactor
    : public grpc::ClientBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer> {
 public:
  StreamReactor(grpc::GenericStub& stub, std::string method,
                grpc::ByteBuffer request, const HttpRequest& http_request)
      : method_(std::move(method)), request_(std::move(request)) {
    ForwardCaller(http_request, absl::ZeroDuration(), context_);
    stub.PrepareBidiStreamingCall(&context_, method_, grpc::StubOptions(),
                                  this);
    // Reads start outside reactions (Next), so the call is held open until
    // the reading is over.
    AddHold();
    StartWriteLast(&request_, grpc::WriteOptions());
    StartRead(&read_);
    StartCall();
  }

  void OnWriteDone(bool) override {}  // a failed write shows in the status

  void OnReadDone(bool ok) override {
    bool release = false;
    {
      absl::MutexLock lock(&mu_);
      reading_ = false;
      if (!ok || abandoned_) {
        read_ended_ = true;
        release = true;
      } else if (!first_taken_) {
        have_first_ = true;
        if (on_first_) {
          on_first_();
          on_first_ = nullptr;
        }
      } else if (on_message_) {
        GatewayStream::OnMessage on_message = std::move(on_message_);
        on_message_ = nullptr;
        on_message(&read_, absl::OkStatus());
      }
    }
    if (release) RemoveHold();
  }

  void OnDone(const grpc::Status& status) override {
    bool last;
    {
      absl::MutexLock lock(&mu_);
      done_ = true;
      status_ = common::FromGrpcStatus(status);
      if (on_first_) {
        on_first_();
        on_first_ = nullptr;
      }
      if (on_message_) {
        GatewayStream::OnMessage on_message = std::move(on_message_);
        on_message_ = nullptr;
        on_message(nullptr, status_);
      }
      last = --refs_ == 0;
    }
    if (last) delete this;
  }

  void WhenFirst(std::function<void()> ready) {
    absl::MutexLock lock(&mu_);
    if (have_first_ || done_) {
      ready();
    } else {
      on_first_ = std::move(ready);
    }
  }

  bool TakeFirst(grpc::ByteBuffer& first, absl::Status& end) {
    absl::MutexLock lock(&mu_);
    first_taken_ = true;
    if (have_first_) {
      first = std::move(read_);
      read_.Clear();
      return true;
    }
    end = status_;
    return false;
  }

  void Next(GatewayStream::OnMessage on_message) {
    {
      absl::MutexLock lock(&mu_);
      if (read_ended_) {
        if (done_) {
          on_message(nullptr, status_);
        } else {
          on_message_ = std::move(on_message);  // OnDone brings the status
        }
        return;
      }
      on_message_ = std::move(on_message);
      reading_ = true;
    }
    StartRead(&read_);
  }

  // The handle's end: no callback runs after this returns.
  void Abandon() {
    bool cancel, release;
    {
      absl::MutexLock lock(&mu_);
      abandoned_ = true;
      on_first_ = nullptr;
      on_message_ = nullptr;
      cancel = !done_;
      // A read in flight releases the hold when it completes.
      release = !read_ended_ && !reading_;
      if (release) read_ended_ = true;
    }
    // OnDone may come meanwhile, on another thread or inside these calls:
    // the handle's reference keeps the reactor until they return.
    if (cancel) context_.TryCancel();
    if (release) RemoveHold();
    bool last;
    {
      absl::MutexLock lock(&mu_);
      last = --refs_ == 0;
    }
    if (last) delete this;
  }

  const grpc::ClientContext& context() const { return context_; }

 private:
  grpc::ClientContext context_;
  const std::string method_;  // gRPC keeps a pointer to it
  grpc::ByteBuffer request_;
  grpc::ByteBuffer read_;  // gRPC's while reading_

  absl::Mutex mu_;
  std::function<void()> on_first_ ABSL_GUARDED_BY(mu_);
  GatewayStream::OnMessage on_message_ ABSL_GUARDED_BY(mu_);
  bool reading_ ABSL_GUARDED_BY(mu_) = true;
  bool have_first_ ABSL_GUARDED_BY(mu_) = false;
  bool first_taken_ ABSL_GUARDED_BY(mu_) = false;
  bool read_ended_ ABSL_GUARDED_BY(mu_) = false;  // the hold is released
  bool done_ ABSL_GUARDED_BY(mu_) = false;        // gRPC called OnDone
  bool abandoned_ ABSL_GUARDED_BY(mu_) = false;   // the handle let go
  int refs_ ABSL_GUARDED_BY(mu_) = 2;  // the handle's and gRPC's (OnDone)
  absl::Status status_ ABSL_GUARDED_BY(mu_);
};

}  // namespace gateway_internal

std::shared_ptr<GatewayStream> GatewayStream::Start(
    grpc::GenericStub& stub, std::string method, grpc::ByteBuffer request,
    const HttpRequest& http_request) {
  return std::shared_ptr<GatewayStream>(
      new GatewayStream(new gateway_internal::StreamReactor(
          stub, std::move(method), std::move(request), http_request)));
}

GatewayStream::~GatewayStream() { reactor_->Abandon(); }

void GatewayStream::WhenFirst(std::function<void()> ready) {
  reactor_->WhenFirst(std::move(ready));
}

bool GatewayStream::TakeFirst(grpc::ByteBuffer& first, absl::Status& end) {
  return reactor_->TakeFirst(first, end);
}

void GatewayStream::Next(OnMessage on_message) {
  reactor_->Next(std::move(on_message));
}

const std::multimap<grpc::string_ref, grpc::string_ref>&
GatewayStream::initial_metadata() const {
  return reactor_->context().GetServerInitialMetadata();
}

}  // namespace metrics::server
