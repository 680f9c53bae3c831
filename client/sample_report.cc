#include "client/sample_report.h"

#include <google/protobuf/util/json_util.h>

#include <cmath>
#include <cstdint>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/json_text.h"

namespace metrics::client {

namespace {

// A value as JSON and text: integers (most readings are counts of bytes,
// hertz or errors) in full, where the shortest form would print 1400000000
// as 1.4e+09.
void AppendNumber(std::string& out, double v) {
  if (std::floor(v) == v && std::fabs(v) < 9007199254740992.0) {
    absl::StrAppend(&out, static_cast<int64_t>(v));
  } else {
    common::AppendJsonNumber(out, v);
  }
}

std::string NumberText(double v) {
  std::string text;
  AppendNumber(text, v);
  return text;
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

bool IsNote(const absl::Status& s) {
  return s.code() == absl::StatusCode::kUnimplemented;
}

// `items` as a JSON array, one item a line.
std::string Lines(const std::vector<std::string>& items) {
  if (items.empty()) return "[]";
  return absl::StrCat("[\n  ", absl::StrJoin(items, ",\n  "), "\n]");
}

std::string Quoted(absl::string_view text) {
  std::string out;
  common::AppendJsonString(out, text);
  return out;
}

}  // namespace

// Written by hand, not through a JSON document: one series a line reads
// well, and the numbers keep their plain form (AppendNumber).
std::string SampleJson(const SampleReport& report) {
  const absl::flat_hash_map<std::string, int> indexes = GpuIndexes(*report.inventory);
  std::vector<std::string> series;
  for (const Measurement& m : report.sample->measurements) {
    std::string one = absl::StrCat("{\"name\": ", Quoted(m.name), ", \"unit\": ",
                                   Quoted(m.unit), ", \"value\": ");
    AppendNumber(one, m.value);
    if (!m.gpu_uuid.empty()) {
      auto index = indexes.find(std::string(m.gpu_uuid));
      if (index != indexes.end()) absl::StrAppend(&one, ", \"gpu_index\": ", index->second);
      absl::StrAppend(&one, ", \"gpu_uuid\": ", Quoted(m.gpu_uuid));
    }
    series.push_back(one + "}");
  }
  std::vector<std::string> notes, errors;
  for (const absl::Status& s : report.sample->errors) {
    (IsNote(s) ? notes : errors).push_back(Quoted(s.message()));
  }
  std::vector<std::string> processes;
  for (size_t i = 0; i < report.processes.size() &&
                     i < static_cast<size_t>(report.inventory->gpus_size());
       ++i) {
    if (!report.processes[i].has_value()) continue;  // the GPU cannot say
    std::vector<std::string> on_gpu;
    for (const Nvml::GpuProcess& p : *report.processes[i]) {
      on_gpu.push_back(absl::StrCat(
          "{\"pid\": ", p.pid, ", \"used_memory_bytes\": ",
          p.used_memory_bytes.has_value() ? absl::StrCat(*p.used_memory_bytes) : "null",
          "}"));
    }
    const v1::GpuInventory& gpu = report.inventory->gpus(static_cast<int>(i));
    processes.push_back(absl::StrCat("{\"gpu_index\": ", gpu.index(), ", \"gpu_uuid\": ",
                                     Quoted(gpu.uuid()), ", \"processes\": [",
                                     absl::StrJoin(on_gpu, ", "), "]}"));
  }
  std::string inventory;
  google::protobuf::util::JsonPrintOptions options;
  options.preserve_proto_field_names = true;
  // GPU 0's index and an empty gpu_status are answers too.
  options.always_print_primitive_fields = true;
  // An inventory always converts; were it not to, the field says so.
  if (!google::protobuf::util::MessageToJsonString(*report.inventory, &inventory, options)
           .ok()) {
    inventory = Quoted("not convertible");
  }
  std::string interval;
  AppendNumber(interval, report.interval_seconds);
  return absl::StrCat("{\"interval_seconds\": ", interval, ",\n\"series\": ", Lines(series),
                      ",\n\"inventory\": ", inventory, ",\n\"gpu_processes\": ",
                      Lines(processes), ",\n\"notes\": ", Lines(notes),
                      ",\n\"errors\": ", Lines(errors), "}\n");
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
