// The REST gateway's JSON for chart data (QuerySeries, SummarizeSeries and
// FollowSeries answers), written by hand because it is large and on the Web UI's hot
// path: columns as JSON arrays, times as milliseconds since the epoch
// (fractions for sub-millisecond raw points) so a browser plots them
// without parsing. Field names are the proto's in lowerCamelCase, with
// "Us" columns renamed "Ms":
//   {"start": "<RFC 3339>", "end": "<RFC 3339>", "series": [{
//     "series": {"agentId", "gpuUuid", "name", "unit", "firstTime",
//                "lastTime", "sampleCount"},
//     "resolutionMs": 10000, "bucketStartMs": [...], "count": [...],
//     "min": [...], "max": [...], "mean": [...], "firstTimeMs": [...],
//     "firstValue": [...], "lastTimeMs": [...], "lastValue": [...]}]}
// A CHART view answer (QuerySeriesRequest.view) is compact, for the page:
//   {"start", "end", "view": "CHART", "series": [{"series": {...},
//     "resolutionMs": 1200000, "lastSampleMs": 1700604799000,
//     "firstBucketMs": 1700000400000,
//     "min": [...], "max": [...], "mean": [...]}]}
// where bucket i starts at firstBucketMs + i * resolutionMs and null marks
// an empty bucket; raw points (resolutionMs 0) carry "bucketStartMs"
// instead of "firstBucketMs"; lastSampleMs is the newest sample in the
// answer's buckets. Either view carries "rawExpired": true when raw points
// were wanted but retention removed them (the finest stored buckets answer
// instead). SummarizeSeries' answers (the same message) add "trialId",
// "gpuCount" and "agentCount" to each series, and "originMs" beside
// "resolutionMs" in relative time. Values have 6 significant digits (the page
// shows 3; a spike of 100 still reads 100).
// bench/chart_json_bench compares it with protobuf's JSON printer.
//
// Thread-safety: pure function.
#ifndef METRICS_SERVER_REST_CHART_JSON_H_
#define METRICS_SERVER_REST_CHART_JSON_H_

#include <string>

#include "proto/metrics/v1/query.pb.h"

namespace metrics::server {

void AppendChartJson(std::string& out, const v1::QuerySeriesResponse& answer);

// A CHART view's value: printf's "%.6g" ("37.5234", "1e+06"); a value that
// is not finite as null.
void AppendRounded(std::string& out, double v);

}  // namespace metrics::server

#endif  // METRICS_SERVER_REST_CHART_JSON_H_
