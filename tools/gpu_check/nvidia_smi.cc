#include "tools/gpu_check/nvidia_smi.h"

#include <cstdlib>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

namespace metrics::gpu_check {

namespace {

std::vector<absl::string_view> Lines(absl::string_view text) {
  std::vector<absl::string_view> lines;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    line = absl::StripAsciiWhitespace(line);
    if (!line.empty()) lines.push_back(line);
  }
  return lines;
}

}  // namespace

std::optional<double> SmiNumber(absl::string_view text) {
  text = absl::StripAsciiWhitespace(text);
  if (absl::StartsWithIgnoreCase(text, "0x")) {
    uint64_t bits = 0;
    if (!absl::SimpleHexAtoi(text.substr(2), &bits)) return std::nullopt;
    return static_cast<double>(bits);
  }
  double value = 0;
  if (!absl::SimpleAtod(text, &value)) return std::nullopt;
  return value;
}

absl::StatusOr<std::vector<SmiGpu>> ParseQueryGpu(
    absl::string_view csv, const std::vector<std::string>& fields) {
  std::vector<SmiGpu> gpus;
  for (absl::string_view line : Lines(csv)) {
    std::vector<std::string> parts = absl::StrSplit(line, ", ");
    if (parts.size() < fields.size()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "nvidia-smi --query-gpu: ", fields.size(), " fields expected in \"",
          line, "\""));
    }
    // A name with ", " in it was split too: join the rest back.
    const std::vector<std::string> tail(parts.begin() + fields.size() - 1, parts.end());
    parts.resize(fields.size());
    parts.back() = absl::StrJoin(tail, ", ");
    SmiGpu& gpu = gpus.emplace_back();
    for (size_t i = 0; i < fields.size(); ++i) {
      gpu[fields[i]] = std::string(absl::StripAsciiWhitespace(parts[i]));
    }
  }
  return gpus;
}

absl::StatusOr<std::vector<SmiProcess>> ParseComputeApps(absl::string_view csv) {
  std::vector<SmiProcess> processes;
  for (absl::string_view line : Lines(csv)) {
    const std::vector<absl::string_view> parts = absl::StrSplit(line, ',');
    int64_t pid = 0;
    if (parts.size() != 3 ||
        !absl::SimpleAtoi(absl::StripAsciiWhitespace(parts[1]), &pid)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "nvidia-smi --query-compute-apps: \"gpu_uuid, pid, used_memory\" "
          "expected, not \"", line, "\""));
    }
    processes.push_back({std::string(absl::StripAsciiWhitespace(parts[0])), pid,
                         SmiNumber(parts[2])});
  }
  return processes;
}

absl::StatusOr<std::map<int, std::map<std::string, double>>> ParseDmon(
    absl::string_view text) {
  std::map<int, std::map<std::string, double>> gpus;
  std::vector<std::string> columns;
  for (absl::string_view line : Lines(text)) {
    if (absl::ConsumePrefix(&line, "#")) {
      // The first comment line names the columns, the second their units.
      if (columns.empty()) columns = absl::StrSplit(line, ' ', absl::SkipWhitespace());
      continue;
    }
    const std::vector<absl::string_view> values =
        absl::StrSplit(line, ' ', absl::SkipWhitespace());
    int index = 0;
    if (columns.empty() || columns[0] != "gpu" || values.size() != columns.size() ||
        !absl::SimpleAtoi(values[0], &index)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "nvidia-smi dmon: a line of ", columns.size(),
          " columns after a header \"# gpu ...\" expected, not \"", line, "\""));
    }
    std::map<std::string, double>& gpu = gpus[index];
    for (size_t c = 1; c < columns.size(); ++c) {
      if (std::optional<double> v = SmiNumber(values[c])) gpu[columns[c]] = *v;
    }
  }
  return gpus;
}

}  // namespace metrics::gpu_check
