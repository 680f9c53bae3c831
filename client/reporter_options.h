// Options of a Reporter (client/reporter.h): where to send, for which trial
// and agent, how to batch, how much to buffer and what to do when the buffer
// is full. Every field has a default that suits one agent sampling about
// once a second; only server_address, trial_id and agent_id must be set.
//
// Thread-safety: a plain value type.
#ifndef METRICS_CLIENT_REPORTER_OPTIONS_H_
#define METRICS_CLIENT_REPORTER_OPTIONS_H_

#include <grpcpp/security/credentials.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "proto/metrics/v1/ingest.pb.h"

namespace metrics::client {

// What Record does when the buffer holds buffer_samples samples.
enum class OverflowPolicy {
  // Wait up to block_timeout for room (acknowledgements free it); then give
  // up with RESOURCE_EXHAUSTED and count the new samples as dropped.
  kBlock,
  // Drop the oldest samples not yet sent to make room, counting them. Never
  // waits, so a training loop is never slowed by an unreachable server.
  kDropOldest,
};

struct ReporterOptions {
  // gRPC target of metricsd, for example "localhost:8081". Required.
  std::string server_address;
  // The trial every sample belongs to; it must exist on the server. Required.
  int32_t trial_id = 0;
  // The host (agent) the samples describe, for example its host name.
  // Required.
  std::string agent_id;
  // Identifies this reporter's stream to the server across reconnects, so a
  // resent batch is stored once. Default: agent id, trial and a random part,
  // unique per Reporter. Set it only to continue a stream deliberately.
  std::string stream_id;
  // Continue stream_id where the server's copy of it ends, when it is a
  // stream another reporter (C++ or Python, or an earlier run of this
  // process) left: the first batch follows the server's last. Without it a
  // reporter that finds the server ahead of it stops, since another client
  // seems to use the stream id. Never resume a stream whose reporter still
  // runs: both would number batches alike and the server keeps one of each.
  bool resume_stream = false;
  // What hardware the samples come from (client/host_inventory.h and
  // Nvml::Describe build one), sent with the first batch of the stream; the
  // trial keeps the newest per agent (GetTrial shows it). Optional.
  std::optional<v1::AgentInventory> inventory;
  // Channel credentials; default insecure (TLS: grpc::SslCredentials(...)).
  std::shared_ptr<grpc::ChannelCredentials> credentials;
  // The API token (metricsctl tokens create --role=reporter --trial=ID),
  // sent as "authorization: Bearer <token>" on every stream; empty sends
  // none. Never written to a log or an event.
  std::string token;

  // A batch is sent when it has this many samples...
  int max_batch_samples = 2000;
  // ...or when its oldest sample has waited this long.
  absl::Duration max_batch_age = absl::Seconds(1);
  // Batches sent and not yet acknowledged, at most.
  int max_unacked_batches = 8;

  // Samples held at once: waiting to be sent plus sent and not yet
  // acknowledged (kept for resending). 200 000 is a few minutes of a
  // busy 8-GPU host and about 5 MB.
  int64_t buffer_samples = 200000;
  OverflowPolicy overflow = OverflowPolicy::kDropOldest;
  // How long Record waits for room under OverflowPolicy::kBlock.
  absl::Duration block_timeout = absl::Seconds(1);
  // Distinct series (name, GPU, unit) a Reporter accepts; Record refuses
  // new ones beyond it with RESOURCE_EXHAUSTED (the server caps series per
  // trial too).
  int max_series = 10000;

  // Reconnect delays grow from initial_backoff by backoff_multiplier up to
  // max_backoff, each randomised by +-backoff_jitter (a fraction), so
  // hosts that lost the server together do not return together.
  absl::Duration initial_backoff = absl::Milliseconds(200);
  absl::Duration max_backoff = absl::Seconds(30);
  double backoff_multiplier = 2.0;
  double backoff_jitter = 0.2;

  // Used when the Reporter is destroyed without Shutdown.
  absl::Duration shutdown_timeout = absl::Seconds(5);

  // Optional. Called on one of the Reporter's threads (never two calls at
  // once) with one line for each notable event: the server unreachable or
  // back, a batch the server refused, a permanent error. Must not block or
  // call the Reporter.
  std::function<void(absl::string_view event)> on_event;
};

}  // namespace metrics::client

#endif  // METRICS_CLIENT_REPORTER_OPTIONS_H_
