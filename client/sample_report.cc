#include "client/sample_report.h"

#include <google/protobuf/util/json_util.h>

#include <boost/json.hpp>

#include <cmath>
#include <cstdint>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace metrics::client {

namespace {

namespace json = boost::json;

// A value as JSON: integers (most readings are counts of bytes, hertz or
// errors) without an exponent, so 1400000000 does not print as 1.4E9.
json::value Number(double v) {
  if (std::floor(v) == v && std::fabs(v) < 9007199254740992.0) {
    return static_cast<int64_t>(v);
  }
  return v;
}

// Each GPU's and MIG device's UUID -> its GPU's index in the inventory.
absl::flat_hash_map<std::string, int> GpuIndexes(const v1::AgentInventory& inventory) {
  absl::flat_hash_map<std::string, int> indexes;
  for (const v1::GpuInventory& gpu : inventory.gpus()) {
    indexes[gpu.uuid()] = gpu.index();
    for (const std::string& mig : gpu.mig_devices()) indexes[mig] = gpu.index();
  }
  return indexes;
}

// A value as text: integers in full (absl::StrCat would print 17179869184
// as 1.71799e+10).
std::string NumberText(double v) {
  if (std::floor(v) == v && std::fabs(v) < 9007199254740992.0) {
    return absl::StrCat(static_cast<int64_t>(v));
  }
  return absl::StrFormat("%.10g", v);
}

bool IsNote(const absl::Status& s) {
  return s.code() == absl::StatusCode::kUnimplemented;
}

}  // namespace

std::string SampleJson(const SampleReport& report) {
  const absl::flat_hash_map<std::string, int> indexes = GpuIndexes(*report.inventory);
  json::array series;
  for (const Measurement& m : report.sample->measurements) {
    json::object one;
    one["name"] = std::string(m.name);
    one["unit"] = std::string(m.unit);
    one["value"] = Number(m.value);
    if (!m.gpu_uuid.empty()) {
      auto index = indexes.find(std::string(m.gpu_uuid));
      if (index != indexes.end()) one["gpu_index"] = index->second;
      one["gpu_uuid"] = std::string(m.gpu_uuid);
    }
    series.push_back(std::move(one));
  }
  json::array notes, errors;
  for (const absl::Status& s : report.sample->errors) {
    (IsNote(s) ? notes : errors).push_back(json::string(std::string(s.message())));
  }
  json::array processes;
  for (size_t i = 0; i < report.processes.size() &&
                     i < static_cast<size_t>(report.inventory->gpus_size());
       ++i) {
    if (!report.processes[i].has_value()) continue;  // the GPU cannot say
    json::array on_gpu;
    for (const Nvml::GpuProcess& p : *report.processes[i]) {
      json::object process;
      process["pid"] = p.pid;
      if (p.used_memory_bytes.has_value()) {
        process["used_memory_bytes"] = *p.used_memory_bytes;
      } else {
        process["used_memory_bytes"] = nullptr;
      }
      on_gpu.push_back(std::move(process));
    }
    const v1::GpuInventory& gpu = report.inventory->gpus(static_cast<int>(i));
    processes.push_back(json::object{{"gpu_index", gpu.index()},
                                     {"gpu_uuid", gpu.uuid()},
                                     {"processes", std::move(on_gpu)}});
  }
  std::string inventory_text;
  google::protobuf::util::JsonPrintOptions options;
  options.preserve_proto_field_names = true;
  // GPU 0's index and an empty gpu_status are answers too.
  options.always_print_primitive_fields = true;
  // An inventory always converts; were it not to, the field says so.
  json::value inventory = "not convertible";
  if (google::protobuf::util::MessageToJsonString(*report.inventory,
                                                   &inventory_text, options)
          .ok()) {
    inventory = json::parse(inventory_text);
  }
  json::object out;
  out["interval_seconds"] = report.interval_seconds;
  out["series"] = std::move(series);
  out["inventory"] = std::move(inventory);
  out["gpu_processes"] = std::move(processes);
  out["notes"] = std::move(notes);
  out["errors"] = std::move(errors);
  return json::serialize(out) + "\n";
}

std::string SampleText(const SampleReport& report) {
  const absl::flat_hash_map<std::string, int> indexes = GpuIndexes(*report.inventory);
  std::string out;
  for (const Measurement& m : report.sample->measurements) {
    absl::StrAppend(&out, m.name);
    if (!m.gpu_uuid.empty()) {
      auto index = indexes.find(std::string(m.gpu_uuid));
      absl::StrAppend(&out, " gpu=",
                      index == indexes.end() ? "?" : absl::StrCat(index->second),
                      " ", m.gpu_uuid);
    }
    absl::StrAppend(&out, " ", NumberText(m.value), " ", m.unit, "\n");
  }
  for (size_t i = 0; i < report.processes.size() &&
                     i < static_cast<size_t>(report.inventory->gpus_size());
       ++i) {
    if (!report.processes[i].has_value()) continue;
    for (const Nvml::GpuProcess& p : *report.processes[i]) {
      absl::StrAppend(&out, "gpu process gpu=", i, " pid=", p.pid, " ",
                      p.used_memory_bytes.has_value()
                          ? absl::StrCat(*p.used_memory_bytes, " bytes")
                          : "memory unknown",
                      "\n");
    }
  }
  for (const absl::Status& s : report.sample->errors) {
    absl::StrAppend(&out, IsNote(s) ? "note: " : "error: ", s.message(), "\n");
  }
  return out;
}

}  // namespace metrics::client
