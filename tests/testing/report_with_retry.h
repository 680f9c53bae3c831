// ReportSystemMetrics called as a client must call it: a RESOURCE_EXHAUSTED
// refusal (a full ingest queue, an agent whose rows wait for the sealer) is
// tried again after the server's "retry-after-ms" hint, until `deadline`.
//
// Thread-safety: thread-compatible, as the stub it calls.
#ifndef METRICS_TESTS_TESTING_REPORT_WITH_RETRY_H_
#define METRICS_TESTS_TESTING_REPORT_WITH_RETRY_H_

#include <grpcpp/support/status.h>

#include "absl/time/time.h"
#include "proto/metrics/v1/ingest.grpc.pb.h"

namespace metrics::test_util {

// The last answer: OK, another error, or RESOURCE_EXHAUSTED at `deadline`.
grpc::Status ReportWithRetry(v1::IngestService::StubInterface& stub,
                             const v1::ReportSystemMetricsRequest& request,
                             absl::Time deadline);

}  // namespace metrics::test_util

#endif  // METRICS_TESTS_TESTING_REPORT_WITH_RETRY_H_
