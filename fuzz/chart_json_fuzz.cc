// Fuzz target: the REST gateway's hand-made chart JSON writer over any
// query answer (arbitrary bytes parsed as a QuerySeriesResponse: columns of
// any lengths, NaN and infinite values, any strings). What it writes must
// be valid JSON, which protobuf's own JSON parser checks.
#include <google/protobuf/struct.pb.h>
#include <google/protobuf/util/json_util.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>

#include "proto/metrics/v1/query.pb.h"
#include "server/rest/chart_json.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  metrics::v1::QuerySeriesResponse answer;
  if (!answer.ParseFromArray(data, static_cast<int>(size))) return 0;
  std::string json;
  metrics::server::AppendChartJson(json, answer);
  google::protobuf::Value parsed;
  if (const auto status =
          google::protobuf::util::JsonStringToMessage(json, &parsed);
      !status.ok()) {
    // The writer produced something that is not JSON: show it, then stop.
    std::fprintf(stderr, "not JSON (%s):\n%s\n", status.ToString().c_str(),
                 json.c_str());
    __builtin_trap();
  }
  return 0;
}
