#include "storage/format/packed_report.h"

#include "absl/strings/str_cat.h"
#include "storage/format/value_codec.h"

namespace metrics::storage {

namespace {

absl::Status Corrupt(absl::string_view bytes, absl::string_view why) {
  return absl::DataLossError(absl::StrCat("packed report of ", bytes.size(),
                                          " bytes is not in format 1 or 2: ", why));
}

}  // namespace

std::string PackReport(const std::vector<SeriesValue>& values, RollupState state) {
  std::string out;
  PackReportInto(values, out, state);
  return out;
}

void PackReportInto(const std::vector<SeriesValue>& values, std::string& out,
                    RollupState state) {
  // Sized for the longest encoding, written through a pointer, then cut.
  out.resize(1 + values.size() * (kMaxVarintBytes + kMaxPayloadBytes));
  char* const begin = &out[0];
  char* at = begin;
  *at++ = static_cast<char>(state);
  int64_t previous = 0;
  for (const auto& [id, value] : values) {
    const EncodedValue v = EncodeValue(value);
    at = WriteVarint(at, static_cast<uint64_t>(id - previous) << 4 | v.kind);
    at = WriteValuePayload(at, v);
    previous = id;
  }
  out.resize(at - begin);
}

absl::StatusOr<std::vector<SeriesValue>> UnpackReport(absl::string_view bytes) {
  if (bytes.empty() || (bytes[0] != static_cast<char>(RollupState::kInRollups) &&
                         bytes[0] != static_cast<char>(RollupState::kPending))) {
    return Corrupt(bytes, "unknown version");
  }
  absl::string_view in = bytes.substr(1);
  std::vector<SeriesValue> values;
  values.reserve(in.size() / 2);
  uint64_t id = 0;
  while (!in.empty()) {
    uint64_t head;
    if (!ReadVarint(in, head)) return Corrupt(bytes, "a cut series id");
    const uint64_t delta = head >> 4;
    if (delta == 0 || id + delta > uint64_t{INT64_MAX} || id + delta < id) {
      return Corrupt(bytes, "series ids not ascending");
    }
    id += delta;
    double value;
    if (!ReadValuePayload(in, static_cast<uint8_t>(head & 0xf), value)) {
      return Corrupt(bytes, "a cut or unknown value");
    }
    values.emplace_back(static_cast<int64_t>(id), value);
  }
  return values;
}

}  // namespace metrics::storage
