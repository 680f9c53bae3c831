#include "storage/format/rollup_codec.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "storage/format/value_codec.h"

namespace metrics::storage {

namespace {

constexpr char kFormat1 = 1;
constexpr char kFormat2 = 2;
// Format 2's layout, for a finest bucket the coarser widths do not hold yet.
constexpr char kFormat2Unfolded = 3;
constexpr size_t kFormat1EntryBytes = 9 * 8;

// Flags of format 2, in the high nibble of the third kinds byte.
constexpr uint8_t kFirstIsMin = 1;
constexpr uint8_t kFirstIsMax = 2;
constexpr uint8_t kLastIsMin = 4;
constexpr uint8_t kLastIsMax = 8;

// A time offset: its unit in the low 2 bits (microseconds, milliseconds,
// seconds, or microseconds before), so whole seconds take a byte.
enum TimeUnit : uint8_t { kMicros = 0, kMillis = 1, kSeconds = 2, kBefore = 3 };

char* WriteOffset(char* out, int64_t offset_us) {
  if (offset_us < 0) {
    return WriteVarint(out, (0 - static_cast<uint64_t>(offset_us)) << 2 | kBefore);
  } else if (offset_us % 1000000 == 0) {
    return WriteVarint(out, static_cast<uint64_t>(offset_us / 1000000) << 2 | kSeconds);
  } else if (offset_us % 1000 == 0) {
    return WriteVarint(out, static_cast<uint64_t>(offset_us / 1000) << 2 | kMillis);
  }
  return WriteVarint(out, static_cast<uint64_t>(offset_us) << 2 | kMicros);
}

bool ReadOffset(absl::string_view& in, int64_t& offset_us) {
  uint64_t v;
  if (!ReadVarint(in, v)) return false;
  const uint64_t n = v >> 2;
  switch (v & 3) {
    case kMicros: offset_us = static_cast<int64_t>(n); return true;
    case kMillis:
      if (n > uint64_t{INT64_MAX} / 1000) return false;
      offset_us = static_cast<int64_t>(n) * 1000;
      return true;
    case kSeconds:
      if (n > uint64_t{INT64_MAX} / 1000000) return false;
      offset_us = static_cast<int64_t>(n) * 1000000;
      return true;
    default: offset_us = -static_cast<int64_t>(n); return true;
  }
}

bool Same(double a, double b) { return std::memcmp(&a, &b, sizeof a) == 0; }

// Times are stored as differences; wrapping arithmetic keeps hostile bytes
// from being undefined behaviour (the result is then garbage, not a crash).
int64_t Add(int64_t a, int64_t b) {
  return static_cast<int64_t>(static_cast<uint64_t>(a) +
                              static_cast<uint64_t>(b));
}
int64_t Diff(int64_t a, int64_t b) {
  return static_cast<int64_t>(static_cast<uint64_t>(a) -
                              static_cast<uint64_t>(b));
}

// Count and first and last time: the same for most series of a bucket,
// since an agent reports all of them together.
bool SameShape(const RollupStats& a, const RollupStats& b) {
  return a.count == b.count && a.first_time_us == b.first_time_us &&
         a.last_time_us == b.last_time_us;
}

// The most an entry takes: its id step, count, two offsets, three kind
// bytes and five payloads.
constexpr size_t kMaxEntryBytes = 4 * kMaxVarintBytes + 3 + 5 * kMaxPayloadBytes;

// Writes an entry's stats after its id step, which says whether the shape
// is `previous`'s (then not written again); returns the end.
char* EncodeStats(char* out, const RollupStats& s, int64_t start_us,
                  bool same_shape) {
  if (!same_shape) {
    out = WriteVarint(out, static_cast<uint64_t>(s.count));
    out = WriteOffset(out, Diff(s.first_time_us, start_us));
    if (s.count > 1) out = WriteOffset(out, Diff(s.last_time_us, s.first_time_us));
  }
  if (s.count == 1) {
    const EncodedValue v = EncodeValue(s.first_value);
    *out++ = static_cast<char>(v.kind);
    return WriteValuePayload(out, v);
  }
  uint8_t flags = 0;
  if (Same(s.first_value, s.min)) flags |= kFirstIsMin;
  else if (Same(s.first_value, s.max)) flags |= kFirstIsMax;
  if (Same(s.last_value, s.min)) flags |= kLastIsMin;
  else if (Same(s.last_value, s.max)) flags |= kLastIsMax;
  const EncodedValue sum = EncodeValue(s.sum), min = EncodeValue(s.min),
                     max = EncodeValue(s.max),
                     first = EncodeValue(s.first_value),
                     last = EncodeValue(s.last_value);
  *out++ = static_cast<char>(sum.kind | min.kind << 4);
  *out++ = static_cast<char>(max.kind | first.kind << 4);
  *out++ = static_cast<char>(last.kind | flags << 4);
  out = WriteValuePayload(out, sum);
  out = WriteValuePayload(out, min);
  out = WriteValuePayload(out, max);
  if ((flags & (kFirstIsMin | kFirstIsMax)) == 0) out = WriteValuePayload(out, first);
  if ((flags & (kLastIsMin | kLastIsMax)) == 0) out = WriteValuePayload(out, last);
  return out;
}

// Reads an entry's stats after its id step; `s` comes in holding the
// previous entry's shape, kept when `same_shape`.
bool DecodeStats(absl::string_view& in, int64_t start_us, bool same_shape,
                 RollupStats& s) {
  if (!same_shape) {
    uint64_t count;
    int64_t offset;
    if (!ReadVarint(in, count) || count == 0 || count > uint64_t{INT64_MAX} ||
        !ReadOffset(in, offset)) {
      return false;
    }
    s.count = static_cast<int64_t>(count);
    s.first_time_us = s.last_time_us = Add(start_us, offset);
    if (count > 1) {
      if (!ReadOffset(in, offset)) return false;
      s.last_time_us = Add(s.first_time_us, offset);
    }
  }
  if (s.count == 1) {
    if (in.empty()) return false;
    const auto kind = static_cast<uint8_t>(in.front());
    in.remove_prefix(1);
    if (!ReadValuePayload(in, kind, s.first_value)) return false;
    s.sum = s.min = s.max = s.last_value = s.first_value;
    return true;
  }
  if (in.size() < 3) return false;
  const auto k1 = static_cast<uint8_t>(in[0]), k2 = static_cast<uint8_t>(in[1]),
             k3 = static_cast<uint8_t>(in[2]);
  in.remove_prefix(3);
  const uint8_t flags = k3 >> 4;
  if (!ReadValuePayload(in, k1 & 0xf, s.sum) ||
      !ReadValuePayload(in, k1 >> 4, s.min) ||
      !ReadValuePayload(in, k2 & 0xf, s.max)) {
    return false;
  }
  if (flags & kFirstIsMin) {
    s.first_value = s.min;
  } else if (flags & kFirstIsMax) {
    s.first_value = s.max;
  } else if (!ReadValuePayload(in, k2 >> 4, s.first_value)) {
    return false;
  }
  if (flags & kLastIsMin) {
    s.last_value = s.min;
  } else if (flags & kLastIsMax) {
    s.last_value = s.max;
  } else if (!ReadValuePayload(in, k3 & 0xf, s.last_value)) {
    return false;
  }
  return true;
}

template <typename T>
T Get(const char*& in) {
  T value;
  std::memcpy(&value, in, sizeof(T));
  in += sizeof(T);
  return value;
}

// Appends a series' stats to either form, by id ascending.
void Append(AgentRollup& rollup, int64_t id, const RollupStats& s) {
  rollup.emplace_hint(rollup.end(), id, s);
}
void Append(SortedRollup& rollup, int64_t id, const RollupStats& s) {
  rollup.emplace_back(id, s);
}

template <typename Rollup>
absl::StatusOr<Rollup> DecodeFormat1(absl::string_view bytes, int64_t start_us,
                                     const std::vector<int64_t>* wanted) {
  if ((bytes.size() - 1) % kFormat1EntryBytes != 0) {
    return absl::DataLossError(absl::StrCat(
        "rollup row of ", bytes.size(), " bytes is not in packed format 1"));
  }
  Rollup rollup;
  int64_t previous = 0;
  for (const char* in = bytes.data() + 1; in < bytes.data() + bytes.size();) {
    const auto id = Get<int64_t>(in);
    RollupStats s;
    s.count = Get<int64_t>(in);
    s.sum = Get<double>(in);
    s.min = Get<double>(in);
    s.max = Get<double>(in);
    s.first_time_us = Get<int64_t>(in);
    s.first_value = Get<double>(in);
    s.last_time_us = Get<int64_t>(in);
    s.last_value = Get<double>(in);
    // Registry ids are positive; Add and Merge make at least one sample,
    // and for one sample all fields alike; a bucket's times are near its
    // start (format 2 stores offsets of up to 2^62 microseconds).
    constexpr int64_t kFar = int64_t{1} << 62;
    const int64_t from_start = Diff(s.first_time_us, start_us);
    const int64_t span = Diff(s.last_time_us, s.first_time_us);
    // Format 1 wrote a btree_map's entries: ids ascending, each once (the
    // sorted form ingest merges relies on it).
    if (id <= previous || s.count < 1 || from_start <= -kFar ||
        from_start >= kFar ||
        span < 0 || span >= kFar ||
        (s.count == 1 &&
         (s.first_time_us != s.last_time_us || !Same(s.sum, s.first_value) ||
          !Same(s.min, s.first_value) || !Same(s.max, s.first_value) ||
          !Same(s.last_value, s.first_value)))) {
      return absl::DataLossError(absl::StrCat(
          "rollup row of ", bytes.size(),
          " bytes is not in packed format 1: series ", id, " (count ",
          s.count, ") is not a registry id, after the previous one, with "
          "stats samples give"));
    }
    previous = id;
    if (wanted == nullptr ||
        std::binary_search(wanted->begin(), wanted->end(), id)) {
      Append(rollup, id, s);
    }
  }
  return rollup;
}

template <typename Rollup>
absl::StatusOr<Rollup> Decode(absl::string_view bytes, int64_t start_us,
                              const std::vector<int64_t>* wanted) {
  if (!bytes.empty() && bytes[0] == kFormat1) {
    return DecodeFormat1<Rollup>(bytes, start_us, wanted);
  }
  const auto corrupt = [&] {
    return absl::DataLossError(absl::StrCat(
        "rollup row of ", bytes.size(), " bytes is not in packed format 2"));
  };
  if (bytes.empty() || (bytes[0] != kFormat2 && bytes[0] != kFormat2Unfolded)) {
    return corrupt();
  }
  absl::string_view in = bytes.substr(1);
  Rollup rollup;
  uint64_t id = 0;
  RollupStats s;
  for (bool first = true; !in.empty(); first = false) {
    uint64_t head;
    if (!ReadVarint(in, head)) return corrupt();
    const uint64_t delta = head >> 1;
    const bool same_shape = (head & 1) != 0;
    if (delta == 0 || delta > uint64_t{INT64_MAX} - id ||
        (first && same_shape)) {
      return corrupt();
    }
    id += delta;
    if (!DecodeStats(in, start_us, same_shape, s)) return corrupt();
    const auto series_id = static_cast<int64_t>(id);
    if (wanted == nullptr ||
        std::binary_search(wanted->begin(), wanted->end(), series_id)) {
      Append(rollup, series_id, s);
    }
  }
  return rollup;
}

// Either form of an agent's bucket: (series id, stats) by id ascending.
template <typename Rollup>
std::string Encode(const Rollup& rollup, int64_t bucket_start_us,
                   Folding folding) {
  // Sized for the longest encoding, written through a pointer, then cut.
  std::string out(1 + rollup.size() * kMaxEntryBytes, '\0');
  char* const begin = &out[0];
  char* at = begin;
  *at++ = folding == Folding::kFolded ? kFormat2 : kFormat2Unfolded;
  int64_t previous = 0;
  const RollupStats* previous_stats = nullptr;
  for (const auto& [series_id, s] : rollup) {
    const bool same = previous_stats != nullptr && SameShape(s, *previous_stats);
    at = WriteVarint(at, static_cast<uint64_t>(series_id - previous) << 1 | same);
    at = EncodeStats(at, s, bucket_start_us, same);
    previous = series_id;
    previous_stats = &s;
  }
  out.resize(at - begin);
  out.shrink_to_fit();  // a group holds hundreds until it writes them
  return out;
}

}  // namespace

std::string EncodeAgentRollup(const AgentRollup& rollup,
                              int64_t bucket_start_us, Folding folding) {
  return Encode(rollup, bucket_start_us, folding);
}

std::string EncodeAgentRollup(const SortedRollup& rollup,
                              int64_t bucket_start_us, Folding folding) {
  return Encode(rollup, bucket_start_us, folding);
}

bool IsUnfolded(absl::string_view bytes) {
  return !bytes.empty() && bytes[0] == kFormat2Unfolded;
}

absl::StatusOr<AgentRollup> DecodeAgentRollup(absl::string_view bytes,
                                              int64_t bucket_start_us) {
  return Decode<AgentRollup>(bytes, bucket_start_us, nullptr);
}

absl::StatusOr<AgentRollup> DecodeAgentRollup(
    absl::string_view bytes, int64_t bucket_start_us,
    const std::vector<int64_t>& wanted) {
  return Decode<AgentRollup>(bytes, bucket_start_us, &wanted);
}

absl::StatusOr<SortedRollup> DecodeSortedRollup(absl::string_view bytes,
                                                int64_t bucket_start_us) {
  return Decode<SortedRollup>(bytes, bucket_start_us, nullptr);
}

}  // namespace metrics::storage
