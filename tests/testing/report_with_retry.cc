#include "tests/testing/report_with_retry.h"

#include <grpcpp/client_context.h>

#include <algorithm>
#include <cstdint>
#include <string>

#include "absl/strings/numbers.h"
#include "absl/time/clock.h"

namespace metrics::test_util {

grpc::Status ReportWithRetry(v1::IngestService::StubInterface& stub,
                             const v1::ReportSystemMetricsRequest& request,
                             absl::Time deadline) {
  while (true) {
    grpc::ClientContext context;
    context.set_deadline(absl::ToChronoTime(deadline));
    v1::ReportSystemMetricsResponse response;
    const grpc::Status status = stub.ReportSystemMetrics(&context, request, &response);
    if (status.error_code() != grpc::StatusCode::RESOURCE_EXHAUSTED) return status;
    int64_t ms = 1000;
    const auto& trailers = context.GetServerTrailingMetadata();
    if (auto hint = trailers.find("retry-after-ms"); hint != trailers.end()) {
      (void)absl::SimpleAtoi(std::string(hint->second.data(), hint->second.size()), &ms);
    }
    if (absl::Now() + absl::Milliseconds(ms) >= deadline) return status;
    absl::SleepFor(absl::Milliseconds(std::max<int64_t>(ms, 1)));
  }
}

}  // namespace metrics::test_util
