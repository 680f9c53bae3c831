#include "server/rest/chart_json.h"

#include <cmath>
#include <algorithm>
#include <cstdint>
#include <charconv>

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
  absl::StrAppend(&out, ",\"sampleCount\":", s.sample_count());
  if (s.trial_id() != 0) {  // a summary's
    absl::StrAppend(&out, ",\"trialId\":", s.trial_id(), ",\"gpuCount\":",
                    s.gpu_count(), ",\"agentCount\":", s.agent_count());
  }
  out += '}';
}

}  // namespace

void AppendRounded(std::string& out, double v) {
  if (!std::isfinite(v)) {
    out += "null";
    return;
  }
  // printf's "%.6g", as the standard defines it, without printf's cost
  // (arbitrary-precision division): a third of metricsd's CPU for a
  // summary of 16 agents was there.
  char text[32];
  const std::to_chars_result r =
      std::to_chars(text, text + sizeof text, v, std::chars_format::general, 6);
  out.append(text, r.ptr);
}

namespace {

// How many grid steps of `resolution_us` the bucket starts span, or -1
// when they are not ascending on the grid (never from the engine; the
// writer stays safe on any input) or too sparse for a dense array to pay.
int64_t GridLength(const v1::SeriesBuckets& b) {
  const int64_t step = b.resolution_us();
  const int n = b.bucket_start_us_size();
  if (step <= 0 || n == 0 || b.min_size() != n || b.max_size() != n ||
      b.mean_size() != n) {
    return -1;
  }
  const int64_t first = b.bucket_start_us(0);
  int64_t previous = first;
  for (int i = 1; i < n; ++i) {
    int64_t offset;
    if (b.bucket_start_us(i) <= previous ||
        __builtin_sub_overflow(b.bucket_start_us(i), first, &offset) ||
        offset % step != 0) {
      return -1;
    }
    previous = b.bucket_start_us(i);
  }
  const int64_t length = (previous - first) / step + 1;
  return length <= 2 * int64_t{n} + 16 ? length : -1;
}

// A CHART view's series: its newest sample's time (lastSampleMs), then
// min, max and mean over a grid from firstBucketMs,
// resolutionMs apart, null where a bucket is empty; raw points (and a
// grid too sparse to pay) keep their bucketStartMs.
void AppendChartViewSeries(std::string& out, const v1::SeriesBuckets& b) {
  if (!b.last_time_us().empty()) {
    out += ",\"lastSampleMs\":";
    AppendMillis(out, *std::max_element(b.last_time_us().begin(),
                                        b.last_time_us().end()));
  }
  const int64_t length = GridLength(b);
  if (length < 0) {
    AppendColumn(out, "bucketStartMs", b.bucket_start_us(), AppendMillis);
    AppendColumn(out, "min", b.min(), AppendRounded);
    AppendColumn(out, "max", b.max(), AppendRounded);
    AppendColumn(out, "mean", b.mean(), AppendRounded);
    return;
  }
  const int64_t first = b.bucket_start_us(0);
  out += ",\"firstBucketMs\":";
  AppendMillis(out, first);
  const auto dense = [&](absl::string_view name,
                         const google::protobuf::RepeatedField<double>& column) {
    absl::StrAppend(&out, ",\"", name, "\":[");
    int next = 0;
    for (int64_t i = 0; i < length; ++i) {
      if (i > 0) out += ',';
      if (next < b.bucket_start_us_size() &&
          b.bucket_start_us(next) == first + i * b.resolution_us()) {
        AppendRounded(out, column.Get(next++));
      } else {
        out += "null";
      }
    }
    out += ']';
  };
  dense("min", b.min());
  dense("max", b.max());
  dense("mean", b.mean());
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
  const bool chart = answer.view() == v1::QuerySeriesRequest::CHART;
  if (chart) out += "\"view\":\"CHART\",";
  if (answer.raw_expired()) out += "\"rawExpired\":true,";
  out += "\"series\":[";
  for (int i = 0; i < answer.series_size(); ++i) {
    const v1::SeriesBuckets& b = answer.series(i);
    if (i > 0) out += ',';
    out += "{\"series\":";
    AppendSeries(out, b.series());
    out += ",\"resolutionMs\":";
    AppendMillis(out, b.resolution_us());
    if (b.origin_us() != 0) {
      out += ",\"originMs\":";
      AppendMillis(out, b.origin_us());
    }
    if (chart) {
      AppendChartViewSeries(out, b);
      out += '}';
      continue;
    }
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
