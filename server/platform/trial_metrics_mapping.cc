#include "server/platform/trial_metrics_mapping.h"

#include <google/protobuf/struct.pb.h>
#include <google/protobuf/util/json_util.h>

#include <algorithm>
#include <cmath>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/proto_time.h"
#include "common/time_format.h"
#include "storage/batch_builder.h"

namespace metrics::server {

namespace {

using determined::api::v1::ReportTrialMetricsRequest;
using google::protobuf::Struct;
using google::protobuf::Value;

constexpr absl::string_view kAvgMetrics = "metrics.metrics.avgMetrics";
constexpr absl::string_view kMountLabel = "{mount=";
// Group names are kept in every row's key: bounded like a long label.
constexpr size_t kMaxGroupBytes = 1024;

// A key in a field path: quoted when printable ASCII of at most 64
// characters, else described without echoing it.
std::string Quoted(absl::string_view key) {
  bool printable = key.size() <= 64;
  for (char c : key) printable = printable && absl::ascii_isprint(c);
  if (printable) return absl::StrCat("\"", key, "\"");
  return absl::StrCat("(a key of ", key.size(), " bytes)");
}

// A member of an object in a field path: ".name" for an identifier,
// ["key"] for anything else.
std::string Member(absl::string_view key) {
  bool identifier = !key.empty() && key.size() <= 64 &&
                    (absl::ascii_isalpha(key[0]) || key[0] == '_');
  for (char c : key) identifier = identifier && (absl::ascii_isalnum(c) || c == '_');
  if (identifier) return absl::StrCat(".", key);
  return absl::StrCat("[", Quoted(key), "]");
}

absl::Status Invalid(absl::string_view where, absl::string_view why) {
  return absl::InvalidArgumentError(absl::StrCat(where, ": ", why));
}

std::string Described(const Value& v) {
  switch (v.kind_case()) {
    case Value::kNumberValue:
      return "a number";
    case Value::kStringValue:
      return absl::StrCat("the string ", Quoted(v.string_value()));
    case Value::kBoolValue:
      return v.bool_value() ? "true" : "false";
    case Value::kStructValue:
      return "an object";
    case Value::kListValue:
      return "an array";
    default:
      return "null";
  }
}

// Python's non-finite floats, as the platform's harness writes them (and
// as the REST gateway turns json's bare tokens into).
bool IsNonFiniteText(const Value& v) {
  if (v.kind_case() != Value::kStringValue) return false;
  const std::string& s = v.string_value();
  return s == "NaN" || s == "Infinity" || s == "-Infinity";
}

absl::string_view UnitOf(absl::string_view name) {
  for (const signals::Signal& u : kProfilingUnits) {
    if (u.name == name) return u.unit;
  }
  return "";
}

// An object's keys in order, so refusals name the same field every time.
std::vector<const std::string*> SortedKeys(const Struct& s) {
  std::vector<const std::string*> keys;
  keys.reserve(s.fields_size());
  for (const auto& [key, value] : s.fields()) keys.push_back(&key);
  std::sort(keys.begin(), keys.end(),
            [](const std::string* a, const std::string* b) { return *a < *b; });
  return keys;
}

absl::Status CheckGroup(absl::string_view group) {
  if (group.empty()) return Invalid("group", "must not be empty");
  if (group.find('.') != absl::string_view::npos) {
    return Invalid("group", absl::StrCat(Quoted(group), " must not contain \".\""));
  }
  if (group.size() > kMaxGroupBytes) {
    return Invalid("group", absl::StrCat("is ", group.size(),
                                         " bytes long; the limit is ", kMaxGroupBytes));
  }
  if (group.find('\0') != absl::string_view::npos) {
    return Invalid("group", "must not contain a NUL character");
  }
  return absl::OkStatus();
}

// The agents' values of a profiling group.
class ProfilingMapper {
 public:
  ProfilingMapper(const MappedTrialMetrics& report, int64_t time_us,
                  const storage::IngestLimits& limits, absl::Time now)
      : report_(report), time_us_(time_us), limits_(limits), builder_(limits, now) {}

  absl::StatusOr<ProfilingBatches> Map(const Struct& avg) {
    ProfilingBatches out;
    for (const std::string* agent : SortedKeys(avg)) {
      const std::string where = absl::StrCat(kAvgMetrics, "[", Quoted(*agent), "]");
      if (absl::Status s = storage::ValidateLabel(absl::StrCat(where, " (the agent id)"),
                                                  *agent, limits_.max_label_length, false);
          !s.ok()) {
        return s;
      }
      const Value& metrics = avg.fields().at(*agent);
      if (metrics.kind_case() != Value::kStructValue) {
        return Invalid(where, absl::StrCat("expected an object of the agent's metrics, got ",
                                           Described(metrics)));
      }
      agent_ = agent;
      values_ = 0;
      dropped_ = 0;
      for (const std::string* name : SortedKeys(metrics.struct_value())) {
        const Value& v = metrics.struct_value().fields().at(*name);
        const std::string at = absl::StrCat(where, Member(*name));
        if (v.kind_case() == Value::kStructValue) {
          if (absl::Status s = Labelled(at, *name, v.struct_value()); !s.ok()) return s;
        } else if (absl::Status s = Leaf(at, *name, "", v); !s.ok()) {
          return s;
        }
      }
      // One report of an agent is one batch: it must fit one.
      if (values_ > static_cast<int64_t>(limits_.max_series_per_batch)) {
        return Invalid(where, absl::StrCat(values_, " values is more than the limit of ",
                                           limits_.max_series_per_batch, " a report"));
      }
      if (dropped_ > 0) out.dropped.emplace_back(*agent, dropped_);
    }
    out.batches = std::move(builder_).Take();
    for (storage::MetricBatch& b : out.batches) {
      b.stream_id = ProfilingStreamId(report_.group, b.agent_id);
      b.sequence = time_us_;
      b.sequence_is_time = true;
      b.run_id = report_.run_id;
    }
    return out;
  }

 private:
  // {label: {name: value}} below an agent: a GPU's (gpu) or a mount's
  // (disk) values.
  absl::Status Labelled(const std::string& where, const std::string& label,
                        const Struct& values) {
    const bool gpu = report_.group == "gpu";
    if (!gpu && report_.group != "disk") {
      return Invalid(where, absl::StrCat("the ", report_.group,
                                         " group has no labels below the agent; expected "
                                         "a number, got an object"));
    }
    for (const std::string* name : SortedKeys(values)) {
      const Value& v = values.fields().at(*name);
      const std::string at = absl::StrCat(where, Member(*name));
      if (v.kind_case() == Value::kStructValue) {
        return Invalid(at, gpu ? "nested deeper than {agent: {GPU UUID: {name: value}}}"
                               : "nested deeper than {agent: {mount: {name: value}}}");
      }
      absl::Status s = gpu ? Leaf(at, *name, label, v)
                           : Leaf(at, MountSeriesName(*name, label), "", v,
                                  *name);
      if (!s.ok()) return s;
    }
    return absl::OkStatus();
  }

  // One value of series `name` (of GPU `gpu`); `unit_name` names its unit
  // where the series name has a label in it.
  absl::Status Leaf(const std::string& where, const std::string& name,
                    const std::string& gpu, const Value& v,
                    absl::string_view unit_name = "") {
    if (IsNonFiniteText(v)) {
      ++dropped_;
      return absl::OkStatus();
    }
    if (v.kind_case() != Value::kNumberValue) {
      return Invalid(where, absl::StrCat("not a number, got ", Described(v)));
    }
    const absl::string_view unit = UnitOf(unit_name.empty() ? name : unit_name);
    if (absl::Status added = builder_.Add(
            {report_.trial_id, *agent_},
            {name, gpu, unit, time_us_, std::nullopt, v.number_value()});
        !added.ok()) {
      return Invalid(where, added.message());
    }
    ++values_;
    return absl::OkStatus();
  }

  const MappedTrialMetrics& report_;
  const int64_t time_us_;
  const storage::IngestLimits& limits_;
  storage::BatchBuilder builder_;
  const std::string* agent_ = nullptr;
  int64_t values_ = 0;
  int64_t dropped_ = 0;
};

// `value` with non-finite numbers as the strings the platform stores for
// them (a gRPC client can send them; JSON has none).
void StoreNonFiniteAsText(Value& value) {
  switch (value.kind_case()) {
    case Value::kNumberValue:
      if (const double d = value.number_value(); !std::isfinite(d)) {
        value.set_string_value(std::isnan(d) ? "NaN" : d > 0 ? "Infinity" : "-Infinity");
      }
      return;
    case Value::kStructValue:
      for (auto& [key, v] : *value.mutable_struct_value()->mutable_fields()) {
        StoreNonFiniteAsText(v);
      }
      return;
    case Value::kListValue:
      for (Value& v : *value.mutable_list_value()->mutable_values()) {
        StoreNonFiniteAsText(v);
      }
      return;
    default:
      return;
  }
}

// PostgreSQL's jsonb holds no NUL character, in a key or a string.
absl::Status CheckNoNul(const Value& v, const std::string& where) {
  switch (v.kind_case()) {
    case Value::kStringValue:
      if (v.string_value().find('\0') != std::string::npos) {
        return Invalid(where, "a NUL character (\\u0000) cannot be stored");
      }
      return absl::OkStatus();
    case Value::kStructValue:
      for (const std::string* key : SortedKeys(v.struct_value())) {
        const std::string at = absl::StrCat(where, Member(*key));
        if (key->find('\0') != std::string::npos) {
          return Invalid(at, "a NUL character (\\u0000) cannot be stored");
        }
        if (absl::Status s = CheckNoNul(v.struct_value().fields().at(*key), at); !s.ok()) {
          return s;
        }
      }
      return absl::OkStatus();
    case Value::kListValue:
      for (int i = 0; i < v.list_value().values_size(); ++i) {
        if (absl::Status s = CheckNoNul(v.list_value().values(i), absl::StrCat(where, "[", i, "]"));
            !s.ok()) {
          return s;
        }
      }
      return absl::OkStatus();
    default:
      return absl::OkStatus();
  }
}

absl::StatusOr<std::string> StructJson(Struct s, absl::string_view where) {
  Value whole;
  *whole.mutable_struct_value() = s;
  if (absl::Status nul = CheckNoNul(whole, std::string(where)); !nul.ok()) return nul;
  for (auto& [key, v] : *s.mutable_fields()) StoreNonFiniteAsText(v);
  std::string json;
  if (!google::protobuf::util::MessageToJsonString(s, &json).ok()) {
    return Invalid(where, "cannot be written as JSON");
  }
  return json;
}

absl::StatusOr<storage::GenericReport> MapGeneric(const ReportTrialMetricsRequest& request,
                                                  const MappedTrialMetrics& mapped) {
  const auto& metrics = request.metrics();
  const Struct& avg = metrics.metrics().avg_metrics();
  // The platform reads these as numbers; it refuses any other value.
  for (const char* key : {"epoch", "epochs"}) {
    if (auto it = avg.fields().find(key); it != avg.fields().end() &&
                                          it->second.kind_case() != Value::kNumberValue &&
                                          it->second.kind_case() != Value::kNullValue) {
      return Invalid(absl::StrCat(kAvgMetrics, ".", key),
                     absl::StrCat("must be a number, got ", Described(it->second)));
    }
  }
  storage::GenericReport report;
  report.trial_id = mapped.trial_id;
  report.run_id = mapped.run_id;
  report.group = mapped.group;
  if (metrics.has_steps_completed()) report.steps_completed = metrics.steps_completed();
  if (metrics.has_report_time()) {
    report.time_us = absl::ToUnixMicros(common::TimeFromProto(metrics.report_time()));
  }
  absl::StatusOr<std::string> avg_json = StructJson(avg, kAvgMetrics);
  if (!avg_json.ok()) return avg_json.status();
  report.avg_metrics = *std::move(avg_json);
  if (metrics.metrics().batch_metrics_size() > 0) {
    std::string batches = "[";
    for (int i = 0; i < metrics.metrics().batch_metrics_size(); ++i) {
      absl::StatusOr<std::string> one =
          StructJson(metrics.metrics().batch_metrics(i),
                     absl::StrCat("metrics.metrics.batchMetrics[", i, "]"));
      if (!one.ok()) return one.status();
      absl::StrAppend(&batches, i == 0 ? "" : ",", *one);
    }
    batches += "]";
    report.batch_metrics = std::move(batches);
  }
  return report;
}

}  // namespace

std::string MountSeriesName(absl::string_view name, absl::string_view mount) {
  return absl::StrCat(name, kMountLabel, mount, "}");
}

bool IsMountSeries(absl::string_view series_name) {
  return absl::StrContains(series_name, kMountLabel);
}

std::string ProfilingStreamId(absl::string_view group, absl::string_view agent) {
  return absl::StrCat("\x01ReportTrialMetrics/", group, "/", agent);
}

absl::StatusOr<MappedTrialMetrics> MapTrialMetrics(
    const ReportTrialMetricsRequest& request, const storage::IngestLimits& limits,
    absl::Time now) {
  if (absl::Status s = CheckGroup(request.group()); !s.ok()) return s;
  const auto& metrics = request.metrics();
  if (metrics.trial_id() <= 0) {
    return Invalid("metrics.trialId", "must be a positive trial id");
  }
  if (metrics.trial_run_id() < 0) {
    return Invalid("metrics.trialRunId", "must not be negative");
  }
  if (metrics.has_report_time()) {
    const google::protobuf::Timestamp& t = metrics.report_time();
    if (t.nanos() < 0 || t.nanos() > 999999999) {
      return Invalid("metrics.reportTime",
                     absl::StrCat("nanos ", t.nanos(), " is out of range"));
    }
  }
  MappedTrialMetrics mapped;
  mapped.trial_id = metrics.trial_id();
  mapped.run_id = metrics.trial_run_id();
  mapped.group = request.group();
  if (storage::IsProfilingGroup(mapped.group)) {
    const int64_t time_us =
        metrics.has_report_time()
            ? absl::ToUnixMicros(common::TimeFromProto(metrics.report_time()))
            : absl::ToUnixMicros(now);
    // As the store bounds every sample's time; named here, not per value.
    const absl::Time time = absl::FromUnixMicros(time_us);
    if (time < storage::EarliestReportTime() || time > now + limits.max_future) {
      return Invalid("metrics.reportTime",
                     absl::StrCat(common::Rfc3339(time), " is before 2000 or more than ",
                                  absl::FormatDuration(limits.max_future),
                                  " ahead of the server's clock"));
    }
    ProfilingMapper mapper(mapped, time_us, limits, now);
    absl::StatusOr<ProfilingBatches> batches = mapper.Map(metrics.metrics().avg_metrics());
    if (!batches.ok()) return batches.status();
    mapped.profiling = *std::move(batches);
    return mapped;
  }
  absl::StatusOr<storage::GenericReport> generic = MapGeneric(request, mapped);
  if (!generic.ok()) return generic.status();
  mapped.generic = *std::move(generic);
  return mapped;
}

}  // namespace metrics::server
