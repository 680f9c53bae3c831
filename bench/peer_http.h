// The peers benchmark's HTTP side: requests to Prometheus and
// VictoriaMetrics on this machine, and their query_range answers read back.
// Boost.Beast, not tests/testing/http_client.h: the peers (Go's net/http)
// answer large bodies in chunked encoding.
//
// Thread-safety: functions of their arguments.
#ifndef METRICS_BENCH_PEER_HTTP_H_
#define METRICS_BENCH_PEER_HTTP_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace metrics::bench {

// `method target` to 127.0.0.1:port, one connection per request; the body of
// a 2xx answer, else an error naming the status and the body.
absl::StatusOr<std::string> PeerRequest(int port, absl::string_view method,
                                        absl::string_view target,
                                        std::string body = "",
                                        absl::Duration timeout = absl::Minutes(5));

// A port free on 127.0.0.1 now, for a peer to listen on.
absl::StatusOr<int> FreePort();

// One series of a query_range answer (Prometheus' JSON, which VictoriaMetrics
// also speaks).
struct RangeSeries {
  std::map<std::string, std::string> labels;
  std::vector<int64_t> time_ms;
  std::vector<double> values;
};
absl::StatusOr<std::vector<RangeSeries>> ParseQueryRange(absl::string_view json);

// "%-encodes" `text` for a query string.
std::string UrlEncode(absl::string_view text);

}  // namespace metrics::bench

#endif  // METRICS_BENCH_PEER_HTTP_H_
