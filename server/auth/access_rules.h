// Who may call what: one rule per gRPC method, declared in the method's
// .proto as its (metrics.v1.access) option (proto/metrics/v1/access.proto)
// and read from the descriptors; the methods whose .proto files are not
// ours (gRPC's health and reflection, OTLP's Export) have theirs here. And
// the check of a caller (a Principal, from its API token) against a rule
// and a request. Default deny: a method without a rule is refused, and
// metricsd does not start while a method it serves has none
// (CheckAccessRules).
//
// Access: kOpen (anyone: health), kRead (admin, viewer), kAdmin (admin),
// kReadTrial (admin, viewer, and a reporter of the request's trial),
// kIngestTrial (admin, and a reporter of the request's trial). A rule names
// where a request carries its trial ids (field paths such as
// "labels.trial_id" or "batches.labels.trial_id"); a reporter passes only if
// the request names at least one trial and every one is its own. 0 means
// "the stream's trial" on a stream's later messages, checked at its open.
//
// Thread-safety: thread-safe (RuleFor's rules are read once per method and
// kept); the rest are pure functions.
#ifndef METRICS_SERVER_AUTH_ACCESS_RULES_H_
#define METRICS_SERVER_AUTH_ACCESS_RULES_H_

#include <google/protobuf/descriptor.h>
#include <google/protobuf/message.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "storage/api_token.h"

namespace metrics::server {

// A caller, as its token says; never the token itself.
struct Principal {
  int64_t token_id = 0;
  storage::TokenRole role = storage::TokenRole::kViewer;
  std::optional<int32_t> trial_id;  // reporters only
};

// kIngestPerResource: admins and reporters may call; the request names its
// trials in data (OTLP's resource attributes), so the service itself keeps
// a reporter to its own trial, point by point.
enum class Access { kOpen, kRead, kAdmin, kReadTrial, kIngestTrial, kIngestPerResource };

struct MethodRule {
  Access access = Access::kAdmin;
  // Field paths to the request's trial ids (kReadTrial, kIngestTrial).
  std::vector<std::string> trial_paths;
  // A stream whose later messages may name trial 0: the stream's own.
  bool stream_trial = false;
};

// The rule of "/package.Service/Method"; nullptr when there is none (deny).
const MethodRule* RuleFor(absl::string_view full_method);

// OK when every method of `services` has a rule whose trial paths lead to
// int32 fields of its request; otherwise FAILED_PRECONDITION naming each
// method and what its rule lacks.
absl::Status CheckAccessRules(
    const std::vector<const google::protobuf::ServiceDescriptor*>& services);

// The trial ids `request` carries at `rule`'s paths, zeros left out.
std::vector<int32_t> TrialsOf(const MethodRule& rule,
                              const google::protobuf::Message& request);

// OK, or PERMISSION_DENIED saying which right is missing (never the token).
// `first_message`: the first message of a stream (or a unary request).
absl::Status Authorize(const Principal& principal, absl::string_view method,
                       const MethodRule& rule,
                       const google::protobuf::Message& request,
                       bool first_message);

}  // namespace metrics::server

#endif  // METRICS_SERVER_AUTH_ACCESS_RULES_H_
