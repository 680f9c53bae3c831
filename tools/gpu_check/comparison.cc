#include "tools/gpu_check/comparison.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/strip.h"

namespace metrics::gpu_check {

namespace {

enum class Rule {
  kEqual,   // every reading and nvidia-smi's within the tolerance
  kWithin,  // nvidia-smi's within the readings' range, widened
  kOneOf,   // nvidia-smi's equal to one of the readings (a bitset)
};

// One signal: where nvidia-smi has it, in which unit, and how close the
// client must be.
struct Check {
  const char* signal;  // the vocabulary's name
  const char* field;   // --query-gpu's field, or "dmon:<column>"
  const char* unit;    // nvidia-smi's unit
  double per_unit;     // the signal's unit per nvidia-smi's (bytes per MiB)
  Rule rule;
  double tolerance;  // in nvidia-smi's unit
  double relative;   // plus this share of nvidia-smi's value
};

constexpr double kMiB = 1 << 20;
// Memory moves by what processes allocate between the readings; clocks by
// a boost step; nvidia-smi averages power over a second where NVML may not.
constexpr Check kChecks[] = {
    {"gpu_memory_total", "memory.total", "MiB", kMiB, Rule::kEqual, 1, 0},
    {"gpu_memory_used", "memory.used", "MiB", kMiB, Rule::kWithin, 64, 0},
    {"gpu_free_memory", "memory.free", "MiB", kMiB, Rule::kWithin, 64, 0},
    {"gpu_util", "utilization.gpu", "%", 1, Rule::kWithin, 10, 0},
    {"gpu_memory_util", "utilization.memory", "%", 1, Rule::kWithin, 10, 0},
    {"gpu_power", "power.draw", "W", 1, Rule::kWithin, 5, 0.1},
    {"gpu_power_limit", "enforced.power.limit", "W", 1, Rule::kEqual, 0.01, 0},
    {"gpu_temperature", "temperature.gpu", "C", 1, Rule::kWithin, 2, 0},
    {"gpu_sm_clock", "clocks.sm", "MHz", 1e6, Rule::kWithin, 30, 0},
    {"gpu_memory_clock", "clocks.mem", "MHz", 1e6, Rule::kWithin, 30, 0},
    {"gpu_pcie_rx", "dmon:rxpci", "MB/s", kMiB, Rule::kWithin, 2, 0.2},
    {"gpu_pcie_tx", "dmon:txpci", "MB/s", kMiB, Rule::kWithin, 2, 0.2},
    {"gpu_ecc_corrected", "ecc.errors.corrected.volatile.total", "errors", 1,
     Rule::kWithin, 0, 0},
    {"gpu_ecc_uncorrected", "ecc.errors.uncorrected.volatile.total", "errors", 1,
     Rule::kWithin, 0, 0},
    {"gpu_throttle_reasons", "clocks_throttle_reasons.active", "bitset", 1,
     Rule::kOneOf, 0, 0},
};
// A process's memory, as nvidia-smi's used_memory (MiB).
constexpr Check kProcessMemory = {"process_gpu_memory", "used_memory", "MiB",
                                  kMiB, Rule::kWithin, 2, 0};

std::string Number(double v, const Check& check) {
  if (check.rule == Rule::kOneOf) {
    return absl::StrFormat("0x%x", static_cast<uint64_t>(v));
  }
  std::string text = absl::StrFormat("%.2f", v);
  if (absl::EndsWith(text, ".00")) text.resize(text.size() - 3);
  return text;
}

std::string ToleranceText(const Check& check) {
  switch (check.rule) {
    case Rule::kEqual:
      return absl::StrCat("equal, ±", check.tolerance, " ", check.unit);
    case Rule::kOneOf:
      return "one of the readings";
    case Rule::kWithin:
      break;
  }
  std::string text = absl::StrCat("±", check.tolerance, " ", check.unit);
  if (check.relative > 0) absl::StrAppend(&text, " + ", check.relative * 100, " %");
  return text;
}

// The verdict of nvidia-smi's `smi` beside the client's `readings` (each
// unset where that sample lacks it), filling `row`'s client, tolerance and
// verdict.
void Judge(const Check& check, std::optional<double> smi,
           const std::vector<std::optional<double>>& readings, Row& row) {
  std::vector<double> have;
  std::vector<std::string> shown;
  for (const std::optional<double>& r : readings) {
    if (r.has_value()) have.push_back(*r / check.per_unit);
    shown.push_back(r.has_value() ? Number(*r / check.per_unit, check) : "-");
  }
  row.client = have.empty() ? "not reported" : absl::StrJoin(shown, ", ");
  row.tolerance = ToleranceText(check);
  if (!smi.has_value()) {
    row.verdict = have.empty() ? Verdict::kNeither : Verdict::kDiffer;
    return;
  }
  if (have.empty()) {
    row.verdict = Verdict::kDiffer;
    return;
  }
  const auto [lo, hi] = std::minmax_element(have.begin(), have.end());
  const double tolerance = check.tolerance + check.relative * std::fabs(*smi);
  // A hair of slack for the unit conversion's rounding.
  const double slack = 1e-9 * std::max(1.0, std::fabs(*smi));
  bool agree = false;
  switch (check.rule) {
    case Rule::kEqual:
      agree = *hi - *lo <= tolerance + slack && std::fabs(*smi - *lo) <= tolerance + slack &&
              std::fabs(*smi - *hi) <= tolerance + slack;
      break;
    case Rule::kWithin:
      agree = *lo - tolerance - slack <= *smi && *smi <= *hi + tolerance + slack;
      break;
    case Rule::kOneOf:
      agree = std::find(have.begin(), have.end(), *smi) != have.end();
      break;
  }
  row.verdict = agree ? Verdict::kAgree : Verdict::kDiffer;
}

// The client's note on `signal` of GPU `uuid`, without the UUID.
std::string NoteOn(const std::vector<ClientReadings>& readings,
                   const std::string& uuid, const std::string& signal) {
  const std::string prefix = absl::StrCat(uuid, ": ", signal, " ");
  for (const ClientReadings& r : readings) {
    for (const std::string& note : r.notes) {
      if (absl::StartsWith(note, prefix)) return note.substr(uuid.size() + 2);
    }
  }
  return "";
}

std::string Text(const SmiGpu& gpu, const std::string& field) {
  auto it = gpu.find(field);
  return it == gpu.end() ? "" : it->second;
}

// Equal text, such as a UUID or a name.
Row TextRow(const std::string& signal, const std::string& index,
            const std::string& smi, const std::vector<std::string>& client) {
  Row row{signal, index, smi, "", "equal", Verdict::kAgree, ""};
  std::vector<std::string> distinct = client;
  std::sort(distinct.begin(), distinct.end());
  distinct.erase(std::unique(distinct.begin(), distinct.end()), distinct.end());
  row.client = absl::StrJoin(distinct, ", ");
  if (distinct.size() != 1 || distinct[0] != smi) row.verdict = Verdict::kDiffer;
  return row;
}

// Each sample's value of `signal` of device `uuid`; unset where it has none.
std::vector<std::optional<double>> ValuesOf(const std::vector<ClientReadings>& readings,
                                            const std::string& signal,
                                            const std::string& uuid) {
  std::vector<std::optional<double>> values;
  for (const ClientReadings& r : readings) {
    auto v = r.values.find({signal, uuid});
    values.push_back(v == r.values.end() ? std::nullopt : std::optional(v->second));
  }
  return values;
}

void CompareProcesses(const SmiAnswers& smi, const std::string& uuid,
                      const std::string& index,
                      const std::vector<ClientReadings>& readings,
                      const CompareOptions& options, std::vector<Row>& rows) {
  std::map<int64_t, std::optional<double>> smi_listed;
  if (smi.processes.has_value()) {
    for (const SmiProcess& p : *smi.processes) {
      if (p.gpu_uuid == uuid) smi_listed[p.pid] = p.used_mib;
    }
  }
  std::set<int64_t> pids;
  for (const auto& [pid, used] : smi_listed) pids.insert(pid);
  bool client_can_say = false;
  for (const ClientReadings& r : readings) {
    auto listed = r.processes.find(uuid);
    if (listed == r.processes.end()) continue;
    client_can_say = true;
    for (const auto& [pid, used] : listed->second) pids.insert(pid);
  }
  if (!client_can_say) {
    Row row{"compute processes", index,
            smi.processes.has_value() ? absl::StrCat(smi_listed.size(), " listed")
                                      : "not asked",
            "cannot say", "", Verdict::kDiffer,
            NoteOn(readings, uuid, "process_gpu_memory")};
    if (!smi.processes.has_value()) row.verdict = Verdict::kUnchecked;
    if (smi.processes.has_value() && smi_listed.empty()) row.verdict = Verdict::kNeither;
    rows.push_back(std::move(row));
    return;
  }
  for (int64_t pid : pids) {
    Row row;
    row.signal = absl::StrCat("process ", pid);
    row.gpu = index;
    if (!options.pid_visible(pid)) row.note = "not a process of this PID namespace";
    if (!smi.processes.has_value()) {
      row.smi = "not asked";
      row.verdict = Verdict::kUnchecked;
      rows.push_back(std::move(row));
      continue;
    }
    auto in_smi = smi_listed.find(pid);
    std::vector<std::optional<double>> used;
    int listed_by_client = 0;
    for (const ClientReadings& r : readings) {
      auto listed = r.processes.find(uuid);
      std::optional<double> bytes;
      if (listed != r.processes.end()) {
        auto p = listed->second.find(pid);
        if (p != listed->second.end()) {
          ++listed_by_client;
          bytes = p->second;
        }
      }
      used.push_back(bytes);
    }
    if (in_smi == smi_listed.end()) {
      row.smi = "not listed";
      row.client = "listed";
      row.tolerance = "listed by both";
      // A process that came or went between the samples is listed by one.
      row.verdict = listed_by_client < static_cast<int>(readings.size())
                        ? Verdict::kAgree
                        : Verdict::kDiffer;
      rows.push_back(std::move(row));
      continue;
    }
    row.smi = in_smi->second.has_value() ? Number(*in_smi->second, kProcessMemory) + " MiB"
                                         : "memory N/A";
    if (listed_by_client == 0) {
      row.client = "not listed";
      row.tolerance = "listed by both";
      row.verdict = Verdict::kDiffer;
      rows.push_back(std::move(row));
      continue;
    }
    Judge(kProcessMemory, in_smi->second, used, row);
    rows.push_back(std::move(row));
  }
}

}  // namespace

std::vector<std::string> QueryGpuFields() {
  std::vector<std::string> fields = {"index", "uuid", "driver_version"};
  for (const Check& c : kChecks) {
    if (!absl::StartsWith(c.field, "dmon:")) fields.push_back(c.field);
  }
  fields.push_back("name");
  return fields;
}

std::vector<Row> Compare(const SmiAnswers& smi,
                         const std::vector<ClientReadings>& readings,
                         const CompareOptions& options) {
  std::vector<Row> rows;
  std::set<std::string> seen;
  for (const SmiGpu& gpu : smi.gpus) {
    const std::string uuid = Text(gpu, "uuid");
    const std::string index = Text(gpu, "index");
    seen.insert(uuid);
    std::vector<std::string> indexes, names, drivers;
    for (const ClientReadings& r : readings) {
      auto found = r.gpus.find(uuid);
      indexes.push_back(found == r.gpus.end() ? "not seen"
                                              : absl::StrCat(found->second.index));
      if (found != r.gpus.end()) names.push_back(found->second.name);
      drivers.push_back(r.driver_version);
    }
    Row identity = TextRow("uuid " + uuid, index, index, indexes);
    identity.tolerance = "same index";
    const bool found = identity.verdict == Verdict::kAgree;
    rows.push_back(std::move(identity));
    if (!found) continue;
    rows.push_back(TextRow("name", index, Text(gpu, "name"), names));
    rows.push_back(TextRow("driver_version", index, Text(gpu, "driver_version"), drivers));
    for (const Check& check : kChecks) {
      Row row;
      row.signal = check.signal;
      row.gpu = index;
      std::optional<double> value;
      bool unchecked = false;  // nvidia-smi could not be asked for it
      absl::string_view field = check.field;
      if (absl::ConsumePrefix(&field, "dmon:")) {
        if (!smi.dmon.has_value()) {
          unchecked = true;
          row.smi = "dmon failed";
          row.note = smi.dmon_error;
        } else {
          int i = 0;
          auto g = absl::SimpleAtoi(index, &i) ? smi.dmon->find(i) : smi.dmon->end();
          if (g != smi.dmon->end()) {
            auto v = g->second.find(std::string(field));
            if (v != g->second.end()) value = v->second;
          }
          row.smi = value.has_value() ? absl::StrCat(Number(*value, check), " ", check.unit)
                                      : "N/A";
        }
      } else if (smi.unknown_fields.count(check.field) > 0) {
        unchecked = true;
        row.smi = "unknown field";
        row.note = absl::StrCat("this nvidia-smi has no ", check.field);
      } else {
        const std::string text = Text(gpu, check.field);
        value = SmiNumber(text);
        row.smi = value.has_value() ? absl::StrCat(Number(*value, check), " ", check.unit)
                                    : text;
      }
      Judge(check, value, ValuesOf(readings, check.signal, uuid), row);
      if (unchecked) row.verdict = Verdict::kUnchecked;
      if (row.note.empty() && row.verdict != Verdict::kAgree) {
        row.note = NoteOn(readings, uuid, check.signal);
      }
      rows.push_back(std::move(row));
    }
    if (options.pid.has_value()) {
      Row row;
      row.signal = absl::StrCat("process_gpu_memory (pid ", *options.pid, ")");
      row.gpu = index;
      std::optional<double> used;
      if (smi.processes.has_value()) {
        used = 0;
        for (const SmiProcess& p : *smi.processes) {
          if (p.gpu_uuid == uuid && p.pid == *options.pid) *used += p.used_mib.value_or(0);
        }
        row.smi = absl::StrCat(Number(*used, kProcessMemory), " MiB");
      } else {
        row.smi = "not asked";
      }
      Judge(kProcessMemory, used, ValuesOf(readings, kProcessMemory.signal, uuid), row);
      if (!smi.processes.has_value()) row.verdict = Verdict::kUnchecked;
      if (row.verdict != Verdict::kAgree) row.note = NoteOn(readings, uuid, "process_gpu_memory");
      rows.push_back(std::move(row));
    }
    CompareProcesses(smi, uuid, index, readings, options, rows);
  }
  // A GPU the client sees and nvidia-smi does not.
  for (const ClientReadings& r : readings) {
    for (const auto& [uuid, gpu] : r.gpus) {
      if (!seen.insert(uuid).second) continue;
      rows.push_back({"uuid " + uuid, "", "not listed", absl::StrCat("index ", gpu.index),
                      "same index", Verdict::kDiffer, ""});
    }
  }
  return rows;
}

std::vector<Row> ReadingsOnly(const std::vector<ClientReadings>& readings) {
  std::vector<Row> rows;
  if (readings.empty()) return rows;
  for (const auto& [key, value] : readings[0].values) {
    const auto& [signal, uuid] = key;
    if (uuid.empty()) continue;  // the host's
    Check check = {"", "", "", 1, Rule::kWithin, 0, 0};
    for (const Check& c : kChecks) {
      if (signal == c.signal) check = c;
    }
    if (signal == kProcessMemory.signal) check = kProcessMemory;
    Row row;
    row.signal = signal;
    auto gpu = readings[0].gpus.find(uuid);
    row.gpu = gpu == readings[0].gpus.end() ? uuid : absl::StrCat(gpu->second.index);
    row.smi = "not asked";
    Judge(check, std::nullopt, ValuesOf(readings, signal, uuid), row);
    row.client = absl::StrCat(row.client, " ", check.unit);
    row.tolerance = "";
    row.verdict = Verdict::kUnchecked;
    rows.push_back(std::move(row));
  }
  return rows;
}

std::string MarkdownTable(const std::vector<Row>& rows, const std::string& client) {
  const auto cell = [](const std::string& text) {
    return absl::StrReplaceAll(text, {{"|", "\\|"}, {"\n", " "}});
  };
  std::string out = absl::StrCat("| signal | GPU | nvidia-smi | ", client,
                                 " | tolerance | verdict | note |\n",
                                 "|---|---|---|---|---|---|---|\n");
  for (const Row& r : rows) {
    const char* verdict = r.verdict == Verdict::kAgree     ? "agree"
                          : r.verdict == Verdict::kDiffer  ? "**DIFFER**"
                          : r.verdict == Verdict::kNeither ? "neither answers"
                                                           : "unchecked";
    absl::StrAppend(&out, "| ", cell(r.signal), " | ", cell(r.gpu), " | ", cell(r.smi),
                    " | ", cell(r.client), " | ", cell(r.tolerance), " | ", verdict,
                    " | ", cell(r.note), " |\n");
  }
  return out;
}

std::string Tally(const std::vector<Row>& rows) {
  int counts[4] = {};
  for (const Row& r : rows) ++counts[static_cast<int>(r.verdict)];
  return absl::StrCat(counts[0], " agree, ", counts[1], " differ, ", counts[2],
                      " answered by neither, ", counts[3], " unchecked");
}

}  // namespace metrics::gpu_check
