// IngestStreamReactor's options (ingest_stream_reactor.h), apart so that what
// sets them (server_options.h) does not parse gRPC's reactor and the ingest
// protos.
//
// Thread-safety: a plain value.
#ifndef METRICS_SERVER_SERVICES_INGEST_STREAM_OPTIONS_H_
#define METRICS_SERVER_SERVICES_INGEST_STREAM_OPTIONS_H_

#include "absl/time/time.h"

namespace metrics::server {

struct IngestStreamOptions {
  // Batches of one stream waiting for their commit, at most.
  int max_inflight = 8;
  // How long the client is told to wait before retrying when overloaded.
  absl::Duration retry_after = absl::Seconds(1);
  // From the opening message to its answer, waiting for a turn included;
  // an open not started by then is refused as RESOURCE_EXHAUSTED.
  absl::Duration open_timeout = absl::Seconds(10);
};

}  // namespace metrics::server

#endif  // METRICS_SERVER_SERVICES_INGEST_STREAM_OPTIONS_H_
