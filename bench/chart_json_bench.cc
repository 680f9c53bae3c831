// The chart JSON writer (server/rest/chart_json.h) against protobuf's JSON
// printer with the gateway's options, on the same QuerySeriesResponse: a
// chart of --series series of --buckets buckets each. Prints both rates,
// the speedup, and a JSON line. No database needed.
#include <google/protobuf/util/json_util.h>

#include <cstdio>
#include <random>
#include <string>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/time/clock.h"
#include "server/rest/chart_json.h"

ABSL_FLAG(int, series, 25, "series in the answer");
ABSL_FLAG(int, buckets, 1000, "buckets per series");
ABSL_FLAG(absl::Duration, min_time, absl::Seconds(2),
          "time spent on each writer at least");

namespace {

metrics::v1::QuerySeriesResponse Chart(int series, int buckets) {
  std::mt19937_64 random(7);
  std::uniform_real_distribution<double> value(0, 100);
  metrics::v1::QuerySeriesResponse answer;
  answer.mutable_start()->set_seconds(1705610865);
  answer.mutable_end()->set_seconds(1705610865 + 604800);
  for (int s = 0; s < series; ++s) {
    metrics::v1::SeriesBuckets* b = answer.add_series();
    b->mutable_series()->set_agent_id("agent-1");
    b->mutable_series()->set_gpu_uuid(s % 2 == 0 ? "" : "GPU-0");
    b->mutable_series()->set_name("gpu_util");
    b->mutable_series()->set_unit("percent");
    b->mutable_series()->set_sample_count(604800);
    b->set_resolution_us(600000000);
    for (int i = 0; i < buckets; ++i) {
      const int64_t start = 1705610865000000 + int64_t{i} * 600000000;
      b->add_bucket_start_us(start);
      b->add_count(600);
      b->add_min(value(random));
      b->add_max(value(random));
      b->add_mean(value(random));
      b->add_first_time_us(start + 123456);
      b->add_first_value(value(random));
      b->add_last_time_us(start + 599123456);
      b->add_last_value(value(random));
    }
  }
  return answer;
}

// Runs `write` until `min_time` has passed; returns (answers/s, bytes).
template <typename Write>
std::pair<double, size_t> Rate(Write write, absl::Duration min_time) {
  size_t bytes = 0;
  int runs = 0;
  const absl::Time start = absl::Now();
  while (absl::Now() - start < min_time) {
    bytes = write();
    ++runs;
  }
  return {runs / absl::ToDoubleSeconds(absl::Now() - start), bytes};
}

}  // namespace

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  const int series = absl::GetFlag(FLAGS_series);
  const int buckets = absl::GetFlag(FLAGS_buckets);
  const metrics::v1::QuerySeriesResponse answer = Chart(series, buckets);
  const absl::Duration min_time = absl::GetFlag(FLAGS_min_time);

  const auto [ours, our_bytes] = Rate(
      [&] {
        std::string out;
        metrics::server::AppendChartJson(out, answer);
        return out.size();
      },
      min_time);
  google::protobuf::util::JsonPrintOptions options;
  options.always_print_primitive_fields = true;
  const auto [protobuf, protobuf_bytes] = Rate(
      [&] {
        std::string out;
        if (!google::protobuf::util::MessageToJsonString(answer, &out, options)
                 .ok()) {
          std::abort();
        }
        return out.size();
      },
      min_time);

  std::printf("chart of %d series x %d buckets\n", series, buckets);
  std::printf("%-28s %10s %10s %10s\n", "writer", "answers/s", "ms/answer",
              "KiB");
  std::printf("%-28s %10.1f %10.2f %10zu\n", "chart_json (hand-made)", ours,
              1000 / ours, our_bytes / 1024);
  std::printf("%-28s %10.1f %10.2f %10zu\n", "protobuf MessageToJsonString",
              protobuf, 1000 / protobuf, protobuf_bytes / 1024);
  std::printf("speedup: %.1fx\n", ours / protobuf);
  std::printf(
      "{\"series\":%d,\"buckets\":%d,\"chart_json_per_s\":%.1f,"
      "\"protobuf_json_per_s\":%.1f,\"chart_json_bytes\":%zu,"
      "\"protobuf_json_bytes\":%zu,\"speedup\":%.2f}\n",
      series, buckets, ours, protobuf, our_bytes, protobuf_bytes,
      ours / protobuf);
  return 0;
}
