#include "storage/pg/ingest/pending_batch.h"

#include <utility>
#include <vector>

#include "absl/strings/string_view.h"
#include "storage/format/value_codec.h"

namespace metrics::storage::pg {

namespace {

// The number of series, then each series' name, GPU UUID and unit. A label
// equal to the previous series' one (an agent's GPU series come in runs of
// one UUID, and units repeat) is a 0; another is a varint of its length + 1
// and its bytes.
void AppendLabel(std::string& out, absl::string_view label,
                 absl::string_view previous) {
  char length[kMaxVarintBytes];
  if (label == previous) {
    out.append(length, WriteVarint(length, 0));
    return;
  }
  out.append(length, WriteVarint(length, label.size() + 1));
  out.append(label.data(), label.size());
}

// Only reads what AppendLabel wrote, so it cannot fail.
void TakeLabel(absl::string_view& in, std::string& label,
               const std::string& previous) {
  uint64_t length = 0;
  ReadVarint(in, length);
  if (length == 0) {
    label = previous;
    return;
  }
  label.assign(in.data(), length - 1);
  in.remove_prefix(length - 1);
}

}  // namespace

void PendingBatch::PackSeries() {
  if (batch.series.empty()) return;
  size_t bytes = kMaxVarintBytes;
  for (const SeriesDeclaration& s : batch.series) {
    bytes += 3 + s.name.size() + s.gpu_uuid.size() + s.unit.size();
  }
  packed_series.reserve(bytes);
  char count[kMaxVarintBytes];
  packed_series.append(count, WriteVarint(count, batch.series.size()));
  const SeriesDeclaration none;
  const SeriesDeclaration* previous = &none;
  for (const SeriesDeclaration& s : batch.series) {
    AppendLabel(packed_series, s.name, previous->name);
    AppendLabel(packed_series, s.gpu_uuid, previous->gpu_uuid);
    AppendLabel(packed_series, s.unit, previous->unit);
    previous = &s;
  }
  packed_series.shrink_to_fit();  // the reserve counted repeats in full
  std::vector<SeriesDeclaration>().swap(batch.series);
}

void PendingBatch::UnpackSeries() {
  if (packed_series.empty()) return;
  absl::string_view in = packed_series;
  uint64_t count = 0;
  ReadVarint(in, count);
  batch.series.reserve(count);
  const SeriesDeclaration none;
  for (uint64_t i = 0; i < count; ++i) {
    const SeriesDeclaration& previous = i == 0 ? none : batch.series.back();
    SeriesDeclaration s;
    TakeLabel(in, s.name, previous.name);
    TakeLabel(in, s.gpu_uuid, previous.gpu_uuid);
    TakeLabel(in, s.unit, previous.unit);
    batch.series.push_back(std::move(s));
  }
  std::string().swap(packed_series);
}

}  // namespace metrics::storage::pg
