// The CSV form of an export of raw samples: a sink for
// ChartReads::StreamRawSamples that writes one line per sample,
//   time,agent_id,gpu_index,gpu_uuid,name,unit,value
// with RFC 3339 times in UTC with microseconds, fields quoted as RFC 4180
// says where they need it, and values in the shortest form that reads back
// as the same double (so every value round-trips bit for bit). Lines are
// handed on in chunks of about `chunk_bytes`, so an export of any length
// holds one chunk at a time.
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
  static const char* Header();

  // `series` is the read's list; gpu_index[i] is series i's GPU index on its
  // agent, or -1 (written empty) when unknown or not a GPU series. `emit`
  // takes each chunk; an error from it ends the read with that error.
  CsvExportWriter(const std::vector<storage::SeriesInfo>& series,
                  const std::vector<int>& gpu_index, size_t chunk_bytes,
                  std::function<absl::Status(std::string chunk)> emit);

  absl::Status Take(size_t series, const storage::Sample& sample) override;

  // Hands on what is left (after a read that ended well).
  absl::Status Finish();

  int64_t lines() const { return lines_; }

 private:
  std::vector<std::string> middle_;  // ",agent,gpu_index,gpu_uuid,name,unit," per series
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
