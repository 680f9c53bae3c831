#include "server/rest/http_routes.h"


#include <algorithm>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/status_macros.h"
#include "server/http/http_target.h"
#include "server/rest/field_text.h"
#include "server/rest/json_body.h"
#include "google/api/annotations.pb.h"

namespace metrics::server {

namespace {

using google::protobuf::Descriptor;
using google::protobuf::FieldDescriptor;
using google::protobuf::Message;

std::vector<absl::string_view> PathSegments(absl::string_view path) {
  return absl::StrSplit(path.substr(path.empty() || path[0] != '/' ? 0 : 1),
                        '/');
}

// Resolves a dotted field path in `type`; every step but the last must be
// a singular message.
absl::StatusOr<std::vector<const FieldDescriptor*>> ResolvePath(
    const Descriptor* type, absl::string_view path) {
  std::vector<const FieldDescriptor*> fields;
  for (absl::string_view part : absl::StrSplit(path, '.')) {
    if (type == nullptr) {
      return absl::InvalidArgumentError("is not a field of a message");
    }
    const FieldDescriptor* f = FindFieldByAnyName(type, part);
    if (f == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat("names no field (\"", part, "\" is not a field of ",
                       type->full_name(), ")"));
    }
    fields.push_back(f);
    type = f->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE &&
                   !f->is_repeated()
               ? f->message_type()
               : nullptr;
  }
  return fields;
}

// The methods the platform's own clients call with grpc-gateway's habits.
bool IsPlatformClientsMethod(const google::protobuf::MethodDescriptor* method) {
  return method->full_name() == "determined.api.v1.Determined.ReportTrialMetrics";
}

// The scalar at `path` as text, to compare the body's value with the
// path's.
std::string ScalarText(const Message& message, const FieldPath& path) {
  const Message* m = &message;
  for (size_t i = 0; i + 1 < path.size(); ++i) {
    m = &m->GetReflection()->GetMessage(*m, path[i]);
  }
  const FieldDescriptor* f = path.back();
  const google::protobuf::Reflection* r = m->GetReflection();
  switch (f->cpp_type()) {
    case FieldDescriptor::CPPTYPE_INT32:
      return absl::StrCat(r->GetInt32(*m, f));
    case FieldDescriptor::CPPTYPE_INT64:
      return absl::StrCat(r->GetInt64(*m, f));
    case FieldDescriptor::CPPTYPE_UINT32:
      return absl::StrCat(r->GetUInt32(*m, f));
    case FieldDescriptor::CPPTYPE_UINT64:
      return absl::StrCat(r->GetUInt64(*m, f));
    case FieldDescriptor::CPPTYPE_STRING:
      return r->GetString(*m, f);
    default:
      return m->GetReflection()->GetMessage(*m, f).SerializeAsString();
  }
}

// Sets the field at a dotted path from text.
absl::Status SetPath(Message* request, absl::string_view path,
                     absl::string_view value, absl::string_view what) {
  absl::StatusOr<std::vector<const FieldDescriptor*>> fields =
      ResolvePath(request->GetDescriptor(), path);
  if (!fields.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": ", fields.status().message()));
  }
  Message* target = request;
  for (size_t i = 0; i + 1 < fields->size(); ++i) {
    target = target->GetReflection()->MutableMessage(target, (*fields)[i]);
  }
  if (absl::Status s =
          SetFieldFromText(target, fields->back(), value, TextForm::kUrl);
      !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": ", s.message()));
  }
  return absl::OkStatus();
}

absl::Status ParseRoute(const google::api::HttpRule& rule,
                        const google::protobuf::MethodDescriptor* method,
                        Route& route) {
  switch (rule.pattern_case()) {
    case google::api::HttpRule::kGet:
      route.http_method = "GET";
      route.pattern = rule.get();
      break;
    case google::api::HttpRule::kPost:
      route.http_method = "POST";
      route.pattern = rule.post();
      break;
    case google::api::HttpRule::kPatch:
      route.http_method = "PATCH";
      route.pattern = rule.patch();
      break;
    case google::api::HttpRule::kPut:
      route.http_method = "PUT";
      route.pattern = rule.put();
      break;
    case google::api::HttpRule::kDelete:
      route.http_method = "DELETE";
      route.pattern = rule.delete_();
      break;
    default:
      return absl::InvalidArgumentError(absl::StrCat(
          method->full_name(), ": only get, post, patch, put and delete "
                               "routes are supported"));
  }
  route.body = rule.body();
  route.method = method;
  if (IsPlatformClientsMethod(method)) {
    route.body_options.path_fields_may_repeat = true;
    route.body_options.python_non_finite = true;
  }
  if (!absl::StartsWith(route.pattern, "/")) {
    return absl::InvalidArgumentError(absl::StrCat(
        method->full_name(), ": route \"", route.pattern,
        "\" must start with /"));
  }
  for (absl::string_view part : PathSegments(route.pattern)) {
    Route::Segment segment;
    if (absl::StartsWith(part, "{") && absl::EndsWith(part, "}")) {
      segment.variable = true;
      segment.text = std::string(part.substr(1, part.size() - 2));
      if (absl::EndsWith(segment.text, "=*")) {
        segment.text.resize(segment.text.size() - 2);
      }
      absl::StatusOr<std::vector<const FieldDescriptor*>> fields =
          ResolvePath(method->input_type(), segment.text);
      if (!fields.ok() || fields->back()->is_repeated()) {
        return absl::InvalidArgumentError(absl::StrCat(
            method->full_name(), ": route variable {", segment.text,
            "} is not a singular field of ",
            method->input_type()->full_name()));
      }
    } else {
      segment.text = std::string(part);
    }
    route.segments.push_back(std::move(segment));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<RouteTable> RouteTable::Build(
    const std::vector<const google::protobuf::ServiceDescriptor*>& services) {
  RouteTable table;
  for (const google::protobuf::ServiceDescriptor* service : services) {
    for (int m = 0; m < service->method_count(); ++m) {
      const google::protobuf::MethodDescriptor* method = service->method(m);
      if (!method->options().HasExtension(google::api::http)) continue;
      if (method->client_streaming()) {
        return absl::InvalidArgumentError(absl::StrCat(
            method->full_name(), ": client streams cannot have a REST route"));
      }
      const google::api::HttpRule& rule =
          method->options().GetExtension(google::api::http);
      Route route;
      RETURN_IF_ERROR(ParseRoute(rule, method, route));
      table.routes_.push_back(std::move(route));
      for (const google::api::HttpRule& more : rule.additional_bindings()) {
        Route extra;
        RETURN_IF_ERROR(ParseRoute(more, method, extra));
        table.routes_.push_back(std::move(extra));
      }
    }
  }
  return table;
}

namespace {

// Whether `route`'s pattern fits the path `parts`: the number of literal
// segments (more is a better fit) and the variables, or -1.
int Fit(const Route& route, const std::vector<absl::string_view>& parts,
        RouteMatch* match) {
  if (route.segments.size() != parts.size()) return -1;
  int literals = 0;
  for (size_t i = 0; i < parts.size(); ++i) {
    const Route::Segment& segment = route.segments[i];
    if (segment.variable) {
      if (parts[i].empty()) return -1;
      if (match != nullptr) {
        match->variables.emplace_back(segment.text, std::string(parts[i]));
      }
    } else {
      if (segment.text != parts[i]) return -1;
      ++literals;
    }
  }
  return literals;
}

}  // namespace

const Route* RouteTable::MatchPath(absl::string_view path) const {
  const std::vector<absl::string_view> parts = PathSegments(path);
  const Route* best = nullptr;
  int best_literals = -1;
  for (const Route& route : routes_) {
    if (const int literals = Fit(route, parts, nullptr);
        literals > best_literals) {
      best = &route;
      best_literals = literals;
    }
  }
  return best;
}

absl::StatusOr<RouteMatch> RouteTable::Match(absl::string_view http_method,
                                             absl::string_view path,
                                             std::string* allowed) const {
  const std::vector<absl::string_view> parts = PathSegments(path);
  RouteMatch best;
  int best_literals = -1;
  std::vector<std::string> other_methods;
  for (const Route& route : routes_) {
    RouteMatch match{&route, {}};
    const int literals = Fit(route, parts, &match);
    if (literals < 0) continue;
    // HEAD is served wherever GET is.
    const bool head_of_get = http_method == "HEAD" && route.http_method == "GET";
    if (route.http_method != http_method && !head_of_get) {
      other_methods.push_back(route.http_method);
      if (route.http_method == "GET") other_methods.push_back("HEAD");
      continue;
    }
    // A literal segment beats a variable ("/trials/profiler/metrics" over
    // "/trials/{trial_id}/...").
    if (literals > best_literals) {
      best = std::move(match);
      best_literals = literals;
    }
  }
  if (best.route != nullptr) return best;
  if (!other_methods.empty()) {
    if (allowed != nullptr) *allowed = absl::StrJoin(other_methods, ", ");
    return absl::UnimplementedError(absl::StrCat(
        "method ", http_method, " is not allowed on ", path, " (allowed: ",
        absl::StrJoin(other_methods, ", "), ")"));
  }
  return absl::NotFoundError(absl::StrCat("no route for ", http_method, " ",
                                          path));
}

absl::Status BuildRequest(
    const RouteMatch& match, absl::string_view body,
    const std::vector<std::pair<std::string, std::string>>& query,
    google::protobuf::Message* request) {
  const Route& route = *match.route;
  // The fields the path sets: neither the body nor the query may set them.
  std::vector<FieldPath> bound;
  for (const auto& [path, value] : match.variables) {
    absl::StatusOr<FieldPath> fields =
        ResolvePath(request->GetDescriptor(), path);
    if (fields.ok()) bound.push_back(*std::move(fields));
  }
  std::vector<FieldPath> repeated;
  if (!route.body.empty()) {
    Message* target = request;
    std::vector<FieldPath> bound_in_body = bound;
    if (route.body != "*") {
      const FieldDescriptor* f =
          request->GetDescriptor()->FindFieldByName(route.body);
      target = request->GetReflection()->MutableMessage(request, f);
      bound_in_body.clear();
      for (const FieldPath& b : bound) {
        if (b.size() > 1 && b.front() == f) {
          bound_in_body.emplace_back(b.begin() + 1, b.end());
        }
      }
    }
    RETURN_IF_ERROR(ParseJsonBody(body, bound_in_body, target,
                                  route.body_options, &repeated));
  }
  // What the body gave for fields the path sets, to compare with the path.
  std::vector<std::pair<FieldPath, std::string>> from_body;
  for (const FieldPath& r : repeated) {
    FieldPath whole = r;
    if (route.body != "*") {
      whole.insert(whole.begin(),
                   request->GetDescriptor()->FindFieldByName(route.body));
    }
    from_body.emplace_back(whole, ScalarText(*request, whole));
  }
  for (const auto& [path, value] : match.variables) {
    RETURN_IF_ERROR(SetPath(request, path, value,
                            absl::StrCat("path parameter {", path, "}")));
  }
  for (const auto& [path, given] : from_body) {
    if (ScalarText(*request, path) != given) {
      std::vector<std::string> names;
      for (const FieldDescriptor* f : path) names.push_back(f->json_name());
      return absl::InvalidArgumentError(absl::StrCat(
          "request body: \"", absl::StrJoin(names, "."),
          "\": is not the value the request's path gives it"));
    }
  }
  if (route.body == "*") {
    if (!query.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "query parameter ", QuoteForMessage(query.front().first),
          ": this route takes its fields from the request body"));
    }
    return absl::OkStatus();
  }
  for (const auto& [key, value] : query) {
    const std::string what =
        absl::StrCat("query parameter ", QuoteForMessage(key));
    if (absl::StatusOr<FieldPath> fields =
            ResolvePath(request->GetDescriptor(), key);
        fields.ok()) {
      for (const FieldPath& b : bound) {
        // Equal, or one inside the other ("labels" holds "labels.trialId").
        const size_t n = std::min(b.size(), fields->size());
        if (std::equal(b.begin(), b.begin() + n, fields->begin())) {
          return absl::InvalidArgumentError(absl::StrCat(
              what, ": is set by the request's path; it cannot be given "
                    "again"));
        }
      }
    }
    RETURN_IF_ERROR(SetPath(request, key, value, what));
  }
  return absl::OkStatus();
}

}  // namespace metrics::server
