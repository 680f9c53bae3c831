// The CSV form of an export of raw samples: a sink for
// ChartReads::StreamRawSamples that writes a header line, then one line per
// sample,
//   time,agent_id,gpu_index,gpu_uuid,name,unit,value
// with RFC 3339 times in UTC with microseconds, fields quoted as RFC 4180
// says where they need it, and values in the shortest form that reads back
// as the same double (so every value round-trips bit for bit). Lines are
// handed on in chunks of about `chunk_bytes`, so an export of any length
// holds one chunk at a time.
//
// An export that stands rollup buckets in for expired raw samples has four
// more columns, bucket_seconds,min,max,count: a bucket's line has its start
// as time and its mean as value; a raw sample's line leaves them empty.
//
// Thread-safety: not thread-safe; one read drives it.
#ifndef METRICS_QUERY_CSV_EXPORT_H_
#define METRICS_QUERY_CSV_EXPORT_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "storage/metric_store.h"

namespace metrics::query {

class CsvExportWriter : public storage::RawSampleSink {
 public:
  // The header line, with its newline.
  static const char* Header(bool with_buckets);

  // `series` is the read's list (gpu_index written for GPU series only). `emit`
  // takes each chunk; an error from it ends the read with that error. The
  // header is the first line of the first chunk.
  CsvExportWriter(const std::vector<storage::SeriesInfo>& series, bool with_buckets,
                  size_t chunk_bytes,
                  std::function<absl::Status(std::string chunk)> emit);

  absl::Status Take(size_t series, const storage::Sample& sample) override;

  // A rollup bucket of `width_s` seconds of series[series] (with_buckets
  // only).
  absl::Status TakeBucket(size_t series, int64_t bucket_start_us, int width_s,
                          const storage::RollupStats& stats);

  // Hands on what is left (after a read that ended well).
  absl::Status Finish();

  int64_t lines() const { return lines_; }

 private:
  void AppendTime(int64_t time_us);
  absl::Status EndLine();

  std::vector<std::string> middle_;  // ",agent,gpu_index,gpu_uuid,name,unit," per series
  const bool with_buckets_;
  const size_t chunk_bytes_;
  const std::function<absl::Status(std::string)> emit_;
  std::string chunk_;
  int64_t second_ = INT64_MIN;   // the second whose text is cached
  std::string second_text_;      // "2026-11-28T01:02:03"
  int64_t lines_ = 0;
};

// A field as RFC 4180 writes it: quoted (quotes doubled) when it holds a
// comma, a quote, a line break or leading or trailing space; else as is.
std::string CsvField(const std::string& text);

// The shortest decimal text that parses back to exactly `value`; "nan",
// "inf" and "-inf" for the values that have no decimal form.
void AppendRoundTripDouble(std::string& out, double value);

}  // namespace metrics::query

#endif  // METRICS_QUERY_CSV_EXPORT_H_
