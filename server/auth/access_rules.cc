#include "server/auth/access_rules.h"

#include <google/protobuf/descriptor.h>
#include <google/protobuf/reflection.h>

#include <algorithm>

#include "absl/container/flat_hash_map.h"
#include "absl/container/node_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/synchronization/mutex.h"
#include "proto/metrics/v1/access.pb.h"

namespace metrics::server {

namespace {

using google::protobuf::Descriptor;
using google::protobuf::DescriptorPool;
using google::protobuf::FieldDescriptor;
using google::protobuf::Message;
using google::protobuf::MethodDescriptor;
using google::protobuf::Reflection;
using google::protobuf::ServiceDescriptor;

// The methods whose .proto files are kept as their projects publish them
// (or, for reflection, are gRPC's own), so they carry no option of ours.
const absl::flat_hash_map<std::string, MethodRule>& RulesOutsideOurProtos() {
  static const auto* rules = new absl::flat_hash_map<std::string, MethodRule>{
      // Health stays open, as /healthz does: load balancers probe it.
      {"/grpc.health.v1.Health/Check", {Access::kOpen, {}, false}},
      {"/grpc.health.v1.Health/Watch", {Access::kOpen, {}, false}},
      // gRPC's own reflection service cannot call our check; it serves the
      // services' descriptors only (no data), so it is open.
      {"/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo",
       {Access::kOpen, {}, false}},
      {"/opentelemetry.proto.collector.metrics.v1.MetricsService/Export",
       {Access::kIngestPerResource, {}, false}},
  };
  return *rules;
}

// The rule a method's (metrics.v1.access) option declares, if any.
std::optional<MethodRule> DeclaredRule(const MethodDescriptor& method) {
  if (!method.options().HasExtension(v1::access)) return std::nullopt;
  const v1::AccessRule& declared = method.options().GetExtension(v1::access);
  MethodRule rule;
  switch (declared.access()) {
    case v1::ACCESS_OPEN: rule.access = Access::kOpen; break;
    case v1::ACCESS_READ: rule.access = Access::kRead; break;
    case v1::ACCESS_ADMIN: rule.access = Access::kAdmin; break;
    case v1::ACCESS_READ_TRIAL: rule.access = Access::kReadTrial; break;
    case v1::ACCESS_INGEST_TRIAL: rule.access = Access::kIngestTrial; break;
    case v1::ACCESS_INGEST_PER_RESOURCE: rule.access = Access::kIngestPerResource; break;
    default: return std::nullopt;  // unspecified: no rule
  }
  rule.trial_paths.assign(declared.trial_paths().begin(), declared.trial_paths().end());
  rule.stream_trial = declared.stream_trial();
  return rule;
}

// The declared rules read so far: each method's is read from its
// descriptor once, then kept (a node's address stays put as others are
// added). Only methods with a rule are kept, so names of methods that do
// not exist add nothing.
struct DeclaredRules {
  absl::Mutex mu;
  absl::node_hash_map<std::string, MethodRule> rules ABSL_GUARDED_BY(mu);
};

DeclaredRules& Declared() {
  static auto* declared = new DeclaredRules();
  return *declared;
}

// "/package.Service/Method" -> the method's descriptor, or nullptr.
const MethodDescriptor* FindMethod(absl::string_view full_method) {
  if (!absl::ConsumePrefix(&full_method, "/")) return nullptr;
  const size_t slash = full_method.find('/');
  if (slash == absl::string_view::npos) return nullptr;
  return DescriptorPool::generated_pool()->FindMethodByName(absl::StrCat(
      full_method.substr(0, slash), ".", full_method.substr(slash + 1)));
}

// Why `path` does not lead from `request` to an int32 field, or "".
std::string PathProblem(const Descriptor& request, absl::string_view path) {
  const Descriptor* message = &request;
  const std::vector<absl::string_view> parts = absl::StrSplit(path, '.');
  for (size_t i = 0; i < parts.size(); ++i) {
    const FieldDescriptor* field =
        message == nullptr ? nullptr : message->FindFieldByName(std::string(parts[i]));
    if (field == nullptr) {
      return absl::StrCat("trial path \"", path, "\": no field ", parts[i]);
    }
    if (i + 1 < parts.size()) {
      message = field->message_type();
    } else if (field->cpp_type() != FieldDescriptor::CPPTYPE_INT32) {
      return absl::StrCat("trial path \"", path, "\": ", parts[i], " is not an int32");
    }
  }
  return "";
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
  if (auto it = RulesOutsideOurProtos().find(full_method);
      it != RulesOutsideOurProtos().end()) {
    return &it->second;
  }
  DeclaredRules& declared = Declared();
  {
    absl::ReaderMutexLock lock(&declared.mu);
    if (auto it = declared.rules.find(full_method); it != declared.rules.end()) {
      return &it->second;
    }
  }
  const MethodDescriptor* method = FindMethod(full_method);
  std::optional<MethodRule> rule =
      method == nullptr ? std::nullopt : DeclaredRule(*method);
  if (!rule) return nullptr;
  absl::MutexLock lock(&declared.mu);
  return &declared.rules.try_emplace(std::string(full_method), *std::move(rule))
              .first->second;
}

absl::Status CheckAccessRules(
    const std::vector<const ServiceDescriptor*>& services) {
  std::vector<std::string> problems;
  for (const ServiceDescriptor* service : services) {
    for (int m = 0; m < service->method_count(); ++m) {
      const MethodDescriptor& method = *service->method(m);
      const std::string full = absl::StrCat("/", service->full_name(), "/", method.name());
      std::optional<MethodRule> rule;
      if (auto it = RulesOutsideOurProtos().find(full);
          it != RulesOutsideOurProtos().end()) {
        rule = it->second;
      } else {
        rule = DeclaredRule(method);
      }
      if (!rule) {
        problems.push_back(absl::StrCat(
            full, ": no access rule (give it the (metrics.v1.access) option)"));
        continue;
      }
      const bool trial_scoped =
          rule->access == Access::kReadTrial || rule->access == Access::kIngestTrial;
      if (trial_scoped && rule->trial_paths.empty()) {
        problems.push_back(absl::StrCat(full, ": its access needs trial_paths"));
      }
      for (const std::string& path : rule->trial_paths) {
        std::string problem = PathProblem(*method.input_type(), path);
        if (!problem.empty()) problems.push_back(absl::StrCat(full, ": ", problem));
      }
    }
  }
  if (problems.empty()) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrCat(
      "access rules: ", absl::StrJoin(problems, "; ")));
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
