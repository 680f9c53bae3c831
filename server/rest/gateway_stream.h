// One server-streaming call of the REST gateway (rest_gateway.h), driven by
// gRPC's callback API so that no thread waits on it while it is open: not
// for its first message (whose outcome decides the HTTP status; the answer
// is an HttpResponse::Deferred until then), nor after, when each message is
// read once the HTTP side asks for the next piece (HttpResponse::Stream), so
// a reader that does not drain holds the call back and the gateway holds at
// most one message of it.
//
// Lifetime: Start returns the owner's handle; dropping it cancels the call
// without blocking, and no callback given to Next runs after that. The
// reactor behind it frees itself once gRPC is done with it too.
//
// Thread-safety: the handle's methods may be called from any thread, one at
// a time; callbacks run on gRPC's threads (or the caller's, for a message
// already in hand).
#ifndef METRICS_SERVER_REST_GATEWAY_STREAM_H_
#define METRICS_SERVER_REST_GATEWAY_STREAM_H_

#include <grpcpp/client_context.h>
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/support/byte_buffer.h>

#include <functional>
#include <map>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "server/http/http_server.h"

namespace metrics::server {

// Sets up `context` as the gateway forwards every call: the HTTP client's
// address as "x-forwarded-for", its Authorization header as gRPC metadata,
// and a deadline `timeout` from now (none when zero).
void ForwardCaller(const HttpRequest& request, absl::Duration timeout,
                   grpc::ClientContext& context);

namespace gateway_internal {
class StreamReactor;
}  // namespace gateway_internal

class GatewayStream {
 public:
  // The next message, or nullptr at the stream's end with the call's status.
  using OnMessage =
      std::function<void(const grpc::ByteBuffer* message, absl::Status end)>;

  // Starts `method` (its full path) with the serialized `request`.
  static std::shared_ptr<GatewayStream> Start(grpc::GenericStub& stub,
                                              std::string method,
                                              grpc::ByteBuffer request,
                                              const HttpRequest& http_request);
  ~GatewayStream();

  GatewayStream(const GatewayStream&) = delete;
  GatewayStream& operator=(const GatewayStream&) = delete;

  // Calls `ready` once the first message is in or the stream ended
  // without one (at once if so already). `ready` runs under the call's lock:
  // it must only hand over (post), never touch the call.
  void WhenFirst(std::function<void()> ready);
  // After `ready`: true with the first message in `first`, or false when the
  // stream ended without one, with `end` its status.
  bool TakeFirst(grpc::ByteBuffer& first, absl::Status& end);

  // Reads the next message and calls `on_message` with it once.
  void Next(OnMessage on_message);

  // The server's initial metadata; valid after `ready`.
  const std::multimap<grpc::string_ref, grpc::string_ref>& initial_metadata()
      const;

 private:
  explicit GatewayStream(gateway_internal::StreamReactor* reactor)
      : reactor_(reactor) {}

  gateway_internal::StreamReactor* const reactor_;
};

}  // namespace metrics::server

#endif  // METRICS_SERVER_REST_GATEWAY_STREAM_H_
