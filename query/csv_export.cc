#include "query/csv_export.h"

#include <charconv>
#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/time.h"

namespace metrics::query {

const char* CsvExportWriter::Header() {
  return "time,agent_id,gpu_index,gpu_uuid,name,unit,value\n";
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
  // std::to_chars without a precision writes the shortest text that reads
  // back as the same double.
  char buffer[32];
  const std::to_chars_result r = std::to_chars(buffer, buffer + sizeof(buffer), value);
  out.append(buffer, r.ptr);
}

CsvExportWriter::CsvExportWriter(const std::vector<storage::SeriesInfo>& series,
                                 const std::vector<int>& gpu_index, size_t chunk_bytes,
                                 std::function<absl::Status(std::string chunk)> emit)
    : chunk_bytes_(chunk_bytes), emit_(std::move(emit)) {
  middle_.reserve(series.size());
  for (size_t i = 0; i < series.size(); ++i) {
    const storage::SeriesInfo& s = series[i];
    const int index = i < gpu_index.size() ? gpu_index[i] : -1;
    middle_.push_back(absl::StrCat(",", CsvField(s.agent_id), ",",
                                   index >= 0 ? absl::StrCat(index) : "", ",",
                                   CsvField(s.gpu_uuid), ",", CsvField(s.name), ",",
                                   CsvField(s.unit), ","));
  }
  chunk_.reserve(chunk_bytes_ + 256);
}

absl::Status CsvExportWriter::Take(size_t series, const storage::Sample& sample) {
  // Times of a read come in order: the date and time of day change once a
  // second at most, the microseconds every line.
  const int64_t second = sample.time_us >= 0 ? sample.time_us / 1000000
                                             : -((-sample.time_us + 999999) / 1000000);
  if (second != second_) {
    second_ = second;
    second_text_ = absl::FormatTime("%Y-%m-%dT%H:%M:%S", absl::FromUnixSeconds(second),
                                    absl::UTCTimeZone());
  }
  absl::StrAppend(&chunk_, second_text_, ".",
                  absl::StrFormat("%06d", sample.time_us - second * 1000000), "Z",
                  middle_[series]);
  AppendRoundTripDouble(chunk_, sample.value);
  chunk_ += '\n';
  ++lines_;
  if (chunk_.size() < chunk_bytes_) return absl::OkStatus();
  std::string full;
  full.swap(chunk_);
  chunk_.reserve(chunk_bytes_ + 256);
  return emit_(std::move(full));
}

absl::Status CsvExportWriter::Finish() {
  if (chunk_.empty()) return absl::OkStatus();
  std::string rest;
  rest.swap(chunk_);
  return emit_(std::move(rest));
}

}  // namespace metrics::query
