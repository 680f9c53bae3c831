// Fuzz target: the REST gateway's decoding of a stranger's request. The
// input is "METHOD\nTARGET\nBODY": the target (path and query) is parsed
// as the HTTP transport does, matched against the real route table (built
// from the served protos' annotations) and, when a route matches, turned
// into the method's request message from the path, query and JSON body.
// Everything may be refused; nothing may crash, and an accepted request
// must serialize.
#include <google/protobuf/descriptor.h>
#include <google/protobuf/message.h>

#include <cstddef>
#include <cstdint>
#include <memory>

#include "absl/strings/string_view.h"
#include "proto/determined/api/v1/profiler.grpc.pb.h"
#include "proto/metrics/v1/ingest.grpc.pb.h"
#include "proto/metrics/v1/query.grpc.pb.h"
#include "proto/metrics/v1/tokens.grpc.pb.h"
#include "proto/metrics/v1/trials.grpc.pb.h"
#include "server/http/http_target.h"
#include "server/rest/http_routes.h"

namespace {

const metrics::server::RouteTable& Routes() {
  // Each service from a message of its file, so that the file's generated
  // code is linked and registered (a service name alone pulls in nothing).
  static const auto* table = [] {
    std::vector<const google::protobuf::ServiceDescriptor*> services = {
        metrics::v1::CreateTrialRequest::descriptor()->file()->FindServiceByName(
            "TrialService"),
        metrics::v1::CreateTokenRequest::descriptor()->file()->FindServiceByName(
            "TokenService"),
        metrics::v1::StreamSystemMetricsRequest::descriptor()
            ->file()
            ->FindServiceByName("IngestService"),
        metrics::v1::QuerySeriesRequest::descriptor()->file()->FindServiceByName(
            "QueryService"),
        determined::api::v1::GetTrialProfilerMetricsRequest::descriptor()
            ->file()
            ->FindServiceByName("Determined")};
    absl::StatusOr<metrics::server::RouteTable> built =
        metrics::server::RouteTable::Build(services);
    if (!built.ok()) __builtin_trap();
    return new metrics::server::RouteTable(*std::move(built));
  }();
  return *table;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const absl::string_view input(reinterpret_cast<const char*>(data), size);
  const size_t first = input.find('\n');
  if (first == absl::string_view::npos) return 0;
  const size_t second = input.find('\n', first + 1);
  if (second == absl::string_view::npos) return 0;
  const absl::string_view method = input.substr(0, first);
  const absl::string_view target = input.substr(first + 1, second - first - 1);
  const absl::string_view body = input.substr(second + 1);

  absl::StatusOr<metrics::server::RequestTarget> parsed =
      metrics::server::ParseRequestTarget(target);
  if (!parsed.ok()) return 0;
  std::string allowed;
  absl::StatusOr<metrics::server::RouteMatch> match =
      Routes().Match(method, parsed->path, &allowed);
  if (!match.ok()) return 0;
  std::unique_ptr<google::protobuf::Message> request(
      google::protobuf::MessageFactory::generated_factory()
          ->GetPrototype(match->route->method->input_type())
          ->New());
  if (metrics::server::BuildRequest(*match, body, parsed->query, request.get())
          .ok()) {
    std::string bytes;
    if (!request->SerializeToString(&bytes)) __builtin_trap();
  }
  return 0;
}
