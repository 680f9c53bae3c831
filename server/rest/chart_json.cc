#include "server/rest/chart_json.h"

#include <cmath>
#include <cstdint>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "common/json_text.h"
#include "common/time_format.h"
#include "common/proto_time.h"

namespace metrics::server {

namespace {

// Microseconds as milliseconds, exactly: "1700000000123" or
// "1700000000123.456".
void AppendMillis(std::string& out, int64_t us) {
  int64_t ms = us / 1000;
  int64_t rest = us % 1000;
  if (rest < 0) {
    --ms;
    rest += 1000;
  }
  absl::StrAppend(&out, ms);
  if (rest == 0) return;
  char digits[4] = {static_cast<char>('.'), static_cast<char>('0' + rest / 100),
                    static_cast<char>('0' + rest / 10 % 10),
                    static_cast<char>('0' + rest % 10)};
  int length = 4;
  while (digits[length - 1] == '0') --length;
  out.append(digits, length);
}

template <typename Column, typename Write>
void AppendColumn(std::string& out, absl::string_view name,
                  const Column& column, Write write) {
  out += ",\"";
  out.append(name.data(), name.size());
  out += "\":[";
  bool first = true;
  for (const auto& v : column) {
    if (!first) out += ',';
    first = false;
    write(out, v);
  }
  out += ']';
}

// JSON has no NaN or infinity; a mean whose sum overflowed is infinite.
// null reads as a gap.
void AppendNumber(std::string& out, double v) {
  if (std::isfinite(v)) {
    common::AppendJsonNumber(out, v);
  } else {
    out += "null";
  }
}
void AppendInteger(std::string& out, int64_t v) { absl::StrAppend(&out, v); }

void AppendSeries(std::string& out, const v1::Series& s) {
  out += "{\"agentId\":";
  common::AppendJsonString(out, s.agent_id());
  out += ",\"gpuUuid\":";
  common::AppendJsonString(out, s.gpu_uuid());
  out += ",\"name\":";
  common::AppendJsonString(out, s.name());
  out += ",\"unit\":";
  common::AppendJsonString(out, s.unit());
  if (s.has_first_time()) {
    out += ",\"firstTime\":";
    common::AppendJsonString(out, common::Rfc3339(common::TimeFromProto(s.first_time())));
  }
  if (s.has_last_time()) {
    out += ",\"lastTime\":";
    common::AppendJsonString(out, common::Rfc3339(common::TimeFromProto(s.last_time())));
  }
  absl::StrAppend(&out, ",\"sampleCount\":", s.sample_count(), "}");
}

}  // namespace

void AppendChartJson(std::string& out, const v1::QuerySeriesResponse& answer) {
  out += '{';
  if (answer.has_start()) {
    out += "\"start\":";
    common::AppendJsonString(out, common::Rfc3339(common::TimeFromProto(answer.start())));
    out += ',';
  }
  if (answer.has_end()) {
    out += "\"end\":";
    common::AppendJsonString(out, common::Rfc3339(common::TimeFromProto(answer.end())));
    out += ',';
  }
  out += "\"series\":[";
  for (int i = 0; i < answer.series_size(); ++i) {
    const v1::SeriesBuckets& b = answer.series(i);
    if (i > 0) out += ',';
    out += "{\"series\":";
    AppendSeries(out, b.series());
    out += ",\"resolutionMs\":";
    AppendMillis(out, b.resolution_us());
    AppendColumn(out, "bucketStartMs", b.bucket_start_us(), AppendMillis);
    AppendColumn(out, "count", b.count(), AppendInteger);
    AppendColumn(out, "min", b.min(), AppendNumber);
    AppendColumn(out, "max", b.max(), AppendNumber);
    AppendColumn(out, "mean", b.mean(), AppendNumber);
    AppendColumn(out, "firstTimeMs", b.first_time_us(), AppendMillis);
    AppendColumn(out, "firstValue", b.first_value(), AppendNumber);
    AppendColumn(out, "lastTimeMs", b.last_time_us(), AppendMillis);
    AppendColumn(out, "lastValue", b.last_value(), AppendNumber);
    out += '}';
  }
  out += "]}";
}

}  // namespace metrics::server
