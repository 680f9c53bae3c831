#include "query/csv_export.h"

#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "common/json_text.h"

namespace metrics::query {

const char* CsvExportWriter::Header(bool with_buckets) {
  return with_buckets
             ? "time,agent_id,gpu_index,gpu_uuid,name,unit,value,bucket_seconds,min,max,count\n"
             : "time,agent_id,gpu_index,gpu_uuid,name,unit,value\n";
}

std::string CsvField(const std::string& text) {
  const bool quote = text.find_first_of(",\"\r\n") != std::string::npos ||
                     (!text.empty() && (text.front() == ' ' || text.back() == ' '));
  if (!quote) return text;
  std::string out = "\"";
  for (char c : text) {
    if (c == '"') out += '"';
    out += c;
  }
  out += '"';
  return out;
}

void AppendRoundTripDouble(std::string& out, double value) {
  if (std::isnan(value)) {
    out += "nan";
    return;
  }
  if (std::isinf(value)) {
    out += value > 0 ? "inf" : "-inf";
    return;
  }
  common::AppendJsonNumber(out, value);  // the shortest text that reads back the same
}

CsvExportWriter::CsvExportWriter(const std::vector<storage::SeriesInfo>& series,
                                 bool with_buckets,
                                 size_t chunk_bytes,
                                 std::function<absl::Status(std::string chunk)> emit)
    : with_buckets_(with_buckets), chunk_bytes_(chunk_bytes), emit_(std::move(emit)) {
  middle_.reserve(series.size());
  for (size_t i = 0; i < series.size(); ++i) {
    const storage::SeriesInfo& s = series[i];
    middle_.push_back(absl::StrCat(",", CsvField(s.agent_id), ",",
                                   s.gpu_uuid.empty() ? "" : absl::StrCat(s.gpu_index), ",",
                                   CsvField(s.gpu_uuid), ",", CsvField(s.name), ",",
                                   CsvField(s.unit), ","));
  }
  chunk_.reserve(chunk_bytes_ + 256);
  chunk_ = Header(with_buckets_);
}

void CsvExportWriter::AppendTime(int64_t time_us) {
  // Times of a read come in order: the date and time of day change once a
  // second at most, the microseconds every line.
  const int64_t second = time_us >= 0 ? time_us / 1000000 : -((-time_us + 999999) / 1000000);
  if (second != second_) {
    second_ = second;
    second_text_ = absl::FormatTime("%Y-%m-%dT%H:%M:%S", absl::FromUnixSeconds(second),
                                    absl::UTCTimeZone());
  }
  chunk_ += second_text_;
  // ".uuuuuuZ": six digits by hand, a line's most frequent formatting.
  char fraction[8] = {'.', '0', '0', '0', '0', '0', '0', 'Z'};
  for (int64_t micros = time_us - second * 1000000, i = 6; micros > 0; micros /= 10, --i) {
    fraction[i] = static_cast<char>('0' + micros % 10);
  }
  chunk_.append(fraction, sizeof fraction);
}

absl::Status CsvExportWriter::EndLine() {
  chunk_ += '\n';
  ++lines_;
  if (chunk_.size() < chunk_bytes_) return absl::OkStatus();
  std::string full;
  full.swap(chunk_);
  chunk_.reserve(chunk_bytes_ + 256);
  return emit_(std::move(full));
}

absl::Status CsvExportWriter::Take(size_t series, const storage::Sample& sample) {
  AppendTime(sample.time_us);
  chunk_ += middle_[series];
  AppendRoundTripDouble(chunk_, sample.value);
  if (with_buckets_) chunk_ += ",,,,";
  return EndLine();
}

absl::Status CsvExportWriter::TakeBucket(size_t series, int64_t bucket_start_us, int width_s,
                                         const storage::RollupStats& stats) {
  AppendTime(bucket_start_us);
  chunk_ += middle_[series];
  AppendRoundTripDouble(chunk_, stats.sum / static_cast<double>(stats.count));
  absl::StrAppend(&chunk_, ",", width_s, ",");
  AppendRoundTripDouble(chunk_, stats.min);
  chunk_ += ',';
  AppendRoundTripDouble(chunk_, stats.max);
  absl::StrAppend(&chunk_, ",", stats.count);
  return EndLine();
}

absl::Status CsvExportWriter::Finish() {
  if (chunk_.empty()) return absl::OkStatus();
  std::string rest;
  rest.swap(chunk_);
  return emit_(std::move(rest));
}

}  // namespace metrics::query
