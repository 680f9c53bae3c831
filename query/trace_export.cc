#include "query/trace_export.h"

#include <cmath>
#include <cstdlib>
#include <map>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/time.h"
#include "common/json_text.h"
#include "common/time_format.h"

namespace metrics::query {

namespace {

// Processes of the profiler's trace sort by pid (small numbers); ours after.
constexpr int64_t kSortIndexBase = 1000000;

// A JSON number, or null for the values JSON has none for.
void AppendValue(std::string& out, double value) {
  if (std::isfinite(value)) {
    common::AppendJsonNumber(out, value);
  } else {
    out += "null";
  }
}

// `time_us` as microseconds from `base_ns`, exactly (nanosecond digits).
void AppendTs(std::string& out, int64_t time_us, int64_t base_ns) {
  const int64_t ns = time_us * 1000 - base_ns;
  const uint64_t magnitude = ns < 0 ? 0 - static_cast<uint64_t>(ns) : static_cast<uint64_t>(ns);
  if (ns < 0) out += '-';
  absl::StrAppend(&out, magnitude / 1000);
  if (uint64_t fraction = magnitude % 1000; fraction != 0) {
    int digits = 3;
    while (fraction % 10 == 0) {
      fraction /= 10;
      --digits;
    }
    absl::StrAppend(&out, ".", absl::StrFormat("%0*d", digits, fraction));
  }
}

std::string TrackName(const storage::SeriesInfo& s) {
  std::string name = absl::StrCat(s.name, " (", s.unit.empty() ? "1" : s.unit, ")");
  if (!s.gpu_uuid.empty()) absl::StrAppend(&name, " GPU ", s.gpu_index, " ", s.gpu_uuid);
  return name;
}

}  // namespace

absl::Status WriteTrace(const QueryResult& result, int32_t trial_id, int64_t base_time_ns,
                        size_t chunk_bytes,
                        const std::function<absl::Status(std::string chunk)>& emit) {
  std::string out;
  auto flush_if_full = [&]() -> absl::Status {
    if (out.size() < chunk_bytes) return absl::OkStatus();
    std::string full;
    full.swap(out);
    return emit(std::move(full));
  };
  absl::StrAppend(&out, "{\"displayTimeUnit\":\"ms\",\"baseTimeNanoseconds\":", base_time_ns,
                  ",\"otherData\":{\"producer\":\"metricsd\",\"trial_id\":", trial_id);
  if (result.start_us < result.end_us) {
    out += ",\"start\":";
    common::AppendJsonString(out, common::Rfc3339(absl::FromUnixMicros(result.start_us)));
    out += ",\"end\":";
    common::AppendJsonString(out, common::Rfc3339(absl::FromUnixMicros(result.end_us)));
  }
  const int64_t resolution_us = result.series.empty() ? 0 : result.series[0].resolution_us;
  absl::StrAppend(&out, ",\"resolution_us\":", resolution_us,
                  ",\"raw_expired\":", result.raw_expired ? "true" : "false",
                  "},\"traceEvents\":[");
  // Agents by id: their places give the pids.
  std::map<std::string, int64_t> pids;
  for (const SeriesData& s : result.series) pids.emplace(s.series.agent_id, 0);
  int64_t place = 0;
  bool first_event = true;
  auto begin_event = [&] {
    if (!first_event) out += ",\n";
    first_event = false;
  };
  for (auto& [agent, pid] : pids) {
    pid = kTracePidBase + place;
    begin_event();
    absl::StrAppend(&out, "{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":", pid,
                    ",\"tid\":0,\"args\":{\"name\":");
    common::AppendJsonString(out, absl::StrCat("system metrics: ", agent));
    out += "}}";
    begin_event();
    absl::StrAppend(&out, "{\"name\":\"process_sort_index\",\"ph\":\"M\",\"pid\":", pid,
                    ",\"tid\":0,\"args\":{\"sort_index\":", kSortIndexBase + place, "}}");
    ++place;
  }
  for (const SeriesData& s : result.series) {
    const int64_t pid = pids[s.series.agent_id];
    std::string head = absl::StrCat("{\"name\":");
    common::AppendJsonString(head, TrackName(s.series));
    absl::StrAppend(&head, ",\"cat\":\"system\",\"ph\":\"C\",\"pid\":", pid, ",\"tid\":0,\"ts\":");
    for (size_t i = 0; i < s.bucket_start_us.size(); ++i) {
      begin_event();
      out += head;
      AppendTs(out, s.bucket_start_us[i], base_time_ns);
      if (s.resolution_us == 0) {
        out += ",\"args\":{\"value\":";
        AppendValue(out, s.mean[i]);
      } else {
        out += ",\"args\":{\"mean\":";
        AppendValue(out, s.mean[i]);
        out += ",\"min\":";
        AppendValue(out, s.min[i]);
        out += ",\"max\":";
        AppendValue(out, s.max[i]);
      }
      out += "}}";
      if (absl::Status sent = flush_if_full(); !sent.ok()) return sent;
    }
  }
  out += "]}\n";
  return emit(std::move(out));
}

}  // namespace metrics::query
