#include "server/auth/access_rules.h"

#include <google/protobuf/descriptor.h>
#include <google/protobuf/reflection.h>

#include <algorithm>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

namespace metrics::server {

namespace {

using google::protobuf::FieldDescriptor;
using google::protobuf::Message;
using google::protobuf::Reflection;

const absl::flat_hash_map<std::string, MethodRule>& Rules() {
  static const auto* rules = new absl::flat_hash_map<std::string, MethodRule>{
      // Health stays open, as /healthz does: load balancers probe it.
      {"/grpc.health.v1.Health/Check", {Access::kOpen, {}, false}},
      {"/grpc.health.v1.Health/Watch", {Access::kOpen, {}, false}},
      // gRPC's own reflection service cannot call our check; it serves the
      // services' descriptors only (no data), so it is open.
      {"/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo",
       {Access::kOpen, {}, false}},
      {"/metrics.v1.TokenService/CreateToken", {Access::kAdmin, {}, false}},
      {"/metrics.v1.TokenService/ListTokens", {Access::kAdmin, {}, false}},
      {"/metrics.v1.TokenService/RevokeToken", {Access::kAdmin, {}, false}},
      {"/metrics.v1.TrialService/CreateTrial", {Access::kAdmin, {}, false}},
      {"/metrics.v1.TrialService/UpdateTrial", {Access::kAdmin, {}, false}},
      {"/metrics.v1.TrialService/ListTrials", {Access::kRead, {}, false}},
      {"/metrics.v1.TrialService/GetTrial",
       {Access::kReadTrial, {"trial_id"}, false}},
      {"/metrics.v1.IngestService/StreamSystemMetrics",
       {Access::kIngestTrial, {"open.trial_id", "batch.trial_id"}, true}},
      {"/metrics.v1.IngestService/ReportSystemMetrics",
       {Access::kIngestTrial, {"batch.trial_id"}, false}},
      {"/metrics.v1.QueryService/ListSeries",
       {Access::kReadTrial, {"trial_id"}, false}},
      {"/metrics.v1.QueryService/QuerySeries",
       {Access::kReadTrial, {"trial_id"}, false}},
      // Every trial named: a reporter may summarize its own trial only.
      {"/metrics.v1.QueryService/SummarizeSeries",
       {Access::kReadTrial, {"trial_id"}, false}},
      {"/metrics.v1.QueryService/FollowSeries",
       {Access::kReadTrial, {"trial_id"}, false}},
      {"/metrics.v1.QueryService/ExportSamples",
       {Access::kReadTrial, {"trial_id"}, false}},
      {"/metrics.v1.QueryService/ExportTrace",
       {Access::kReadTrial, {"trial_id"}, false}},
      {"/determined.api.v1.Determined/GetTrialProfilerMetrics",
       {Access::kReadTrial, {"labels.trial_id"}, false}},
      {"/determined.api.v1.Determined/GetTrialProfilerAvailableSeries",
       {Access::kReadTrial, {"trial_id"}, false}},
      {"/determined.api.v1.Determined/PostTrialProfilerMetricsBatch",
       {Access::kIngestTrial, {"batches.labels.trial_id"}, false}},
      // The platform's trial-metrics API: its harness reports with a token
      // of the trial (a reporter's, or an admin's).
      {"/determined.api.v1.Determined/ReportTrialMetrics",
       {Access::kIngestTrial, {"metrics.trial_id"}, false}},
      // Every trial named: a reporter may read its own trial only.
      {"/determined.api.v1.Determined/GetMetrics",
       {Access::kReadTrial, {"trial_ids"}, false}},
      {"/opentelemetry.proto.collector.metrics.v1.MetricsService/Export",
       {Access::kIngestPerResource, {}, false}},
  };
  return *rules;
}

// Appends the int32 values at `path` (dot-separated; repeated messages on
// the way are walked) under `message`.
void Collect(const Message& message, absl::Span<const std::string> path,
             std::vector<int32_t>& out) {
  if (path.empty()) return;
  const FieldDescriptor* field =
      message.GetDescriptor()->FindFieldByName(path[0]);
  if (field == nullptr) return;
  const Reflection* reflection = message.GetReflection();
  if (path.size() == 1) {
    if (field->cpp_type() != FieldDescriptor::CPPTYPE_INT32) return;
    if (field->is_repeated()) {
      for (int i = 0; i < reflection->FieldSize(message, field); ++i) {
        out.push_back(reflection->GetRepeatedInt32(message, field, i));
      }
    } else {
      out.push_back(reflection->GetInt32(message, field));
    }
    return;
  }
  if (field->cpp_type() != FieldDescriptor::CPPTYPE_MESSAGE) return;
  if (field->is_repeated()) {
    for (int i = 0; i < reflection->FieldSize(message, field); ++i) {
      Collect(reflection->GetRepeatedMessage(message, field, i),
              path.subspan(1), out);
    }
  } else if (reflection->HasField(message, field)) {
    Collect(reflection->GetMessage(message, field), path.subspan(1), out);
  }
}

std::string ShortName(absl::string_view method) {
  // "/metrics.v1.QueryService/QuerySeries" -> "QueryService.QuerySeries"
  std::vector<absl::string_view> parts = absl::StrSplit(method, '/');
  if (parts.size() != 3) return std::string(method);
  absl::string_view service = parts[1];
  if (size_t dot = service.rfind('.'); dot != absl::string_view::npos) {
    service.remove_prefix(dot + 1);
  }
  return absl::StrCat(service, ".", parts[2]);
}

absl::Status Denied(const Principal& p, absl::string_view method,
                    absl::string_view why) {
  return absl::PermissionDeniedError(
      absl::StrCat("a ", storage::TokenRoleName(p.role), " token may not call ",
                   ShortName(method), why));
}

}  // namespace

const MethodRule* RuleFor(absl::string_view full_method) {
  auto it = Rules().find(full_method);
  return it == Rules().end() ? nullptr : &it->second;
}

std::vector<std::string> MethodsWithRules() {
  std::vector<std::string> names;
  for (const auto& [name, rule] : Rules()) names.push_back(name);
  std::sort(names.begin(), names.end());
  return names;
}

std::vector<int32_t> TrialsOf(const MethodRule& rule, const Message& request) {
  std::vector<int32_t> trials;
  for (const std::string& path : rule.trial_paths) {
    std::vector<std::string> parts = absl::StrSplit(path, '.');
    Collect(request, parts, trials);
  }
  trials.erase(std::remove(trials.begin(), trials.end(), 0), trials.end());
  return trials;
}

absl::Status Authorize(const Principal& principal, absl::string_view method,
                       const MethodRule& rule, const Message& request,
                       bool first_message) {
  using storage::TokenRole;
  if (rule.access == Access::kOpen || principal.role == TokenRole::kAdmin) {
    return absl::OkStatus();
  }
  switch (rule.access) {
    case Access::kOpen:
      return absl::OkStatus();
    case Access::kAdmin:
      return Denied(principal, method, "; it needs an admin token");
    case Access::kRead:
      if (principal.role == TokenRole::kViewer) return absl::OkStatus();
      return Denied(principal, method, "; it needs a viewer or admin token");
    case Access::kReadTrial:
      if (principal.role == TokenRole::kViewer) return absl::OkStatus();
      break;
    case Access::kIngestTrial:
      if (principal.role == TokenRole::kViewer) {
        return Denied(principal, method, "; a viewer token only reads");
      }
      break;
    case Access::kIngestPerResource:
      if (principal.role == TokenRole::kViewer) {
        return Denied(principal, method, "; a viewer token only reads");
      }
      return absl::OkStatus();  // the service keeps it to its trial
  }
  // A reporter: only its own trial.
  const std::vector<int32_t> trials = TrialsOf(rule, request);
  if (trials.empty()) {
    if (rule.stream_trial && !first_message) return absl::OkStatus();
    return Denied(principal, method, " without naming its trial");
  }
  for (int32_t trial : trials) {
    if (!principal.trial_id || trial != *principal.trial_id) {
      return Denied(principal, method,
                    absl::StrCat(" for trial ", trial, "; it is for trial ",
                                 principal.trial_id.value_or(0), " only"));
    }
  }
  return absl::OkStatus();
}

}  // namespace metrics::server
