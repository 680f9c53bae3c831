#include "tools/gpu_check/client_readings.h"

#include <boost/json.hpp>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace metrics::gpu_check {

namespace json = boost::json;

namespace {

// A number, or a protobuf JSON int64 (a string of digits).
std::optional<double> Number(const json::value* v) {
  if (v == nullptr) return std::nullopt;
  if (v->is_number()) return v->to_number<double>();
  double parsed = 0;
  if (v->is_string() && absl::SimpleAtod(std::string(v->as_string()), &parsed)) {
    return parsed;
  }
  return std::nullopt;
}

std::string Text(const json::object& o, const char* key) {
  const json::value* v = o.if_contains(key);
  return v != nullptr && v->is_string() ? std::string(v->as_string()) : "";
}

absl::StatusOr<ClientReadings> Parse(const json::value& root) {
  ClientReadings r;
  const json::object* top = root.if_object();
  const json::value* series = top == nullptr ? nullptr : top->if_contains("series");
  if (series == nullptr || !series->is_array()) {
    return absl::InvalidArgumentError("no \"series\" array");
  }
  for (const json::value& s : series->as_array()) {
    const json::object* o = s.if_object();
    std::optional<double> value = o == nullptr ? std::nullopt : Number(o->if_contains("value"));
    if (!value.has_value()) {
      return absl::InvalidArgumentError(
          absl::StrCat("a series without a number \"value\": ", json::serialize(s)));
    }
    r.values[{Text(*o, "name"), Text(*o, "gpu_uuid")}] = *value;
  }
  if (const json::value* inventory = top->if_contains("inventory");
      inventory != nullptr && inventory->is_object()) {
    r.driver_version = Text(inventory->as_object(), "driver_version");
    if (const json::value* gpus = inventory->as_object().if_contains("gpus");
        gpus != nullptr && gpus->is_array()) {
      for (const json::value& g : gpus->as_array()) {
        if (!g.is_object()) continue;
        ClientGpu gpu;
        gpu.index = static_cast<int>(Number(g.as_object().if_contains("index")).value_or(0));
        gpu.name = Text(g.as_object(), "name");
        r.gpus[Text(g.as_object(), "uuid")] = std::move(gpu);
      }
    }
  }
  if (const json::value* listed = top->if_contains("gpu_processes");
      listed != nullptr && listed->is_array()) {
    for (const json::value& gpu : listed->as_array()) {
      if (!gpu.is_object()) continue;
      auto& on_gpu = r.processes[Text(gpu.as_object(), "gpu_uuid")];
      const json::value* processes = gpu.as_object().if_contains("processes");
      if (processes == nullptr || !processes->is_array()) continue;
      for (const json::value& p : processes->as_array()) {
        if (!p.is_object()) continue;
        std::optional<double> pid = Number(p.as_object().if_contains("pid"));
        if (!pid.has_value()) continue;
        on_gpu[static_cast<int64_t>(*pid)] =
            Number(p.as_object().if_contains("used_memory_bytes"));
      }
    }
  }
  if (const json::value* notes = top->if_contains("notes");
      notes != nullptr && notes->is_array()) {
    for (const json::value& n : notes->as_array()) {
      if (n.is_string()) r.notes.emplace_back(n.as_string());
    }
  }
  return r;
}

}  // namespace

absl::StatusOr<ClientReadings> ParseClientReadings(absl::string_view text) {
  json::error_code error;
  const json::value root = json::parse(json::string_view(text.data(), text.size()), error);
  if (error) {
    return absl::InvalidArgumentError(absl::StrCat("not JSON: ", error.message()));
  }
  return Parse(root);
}

}  // namespace metrics::gpu_check
