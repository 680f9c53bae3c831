// The packed form of an agent's rollup bucket, as system_rollups.stats holds
// it. Format 2 (written since migration 0004) spends bytes where a bucket's
// stats carry information. A version byte (2), then per series in ascending
// id: a varint of (id minus the previous one) << 1 | same shape; unless the
// shape (count, first and last time) is the previous series' (as it is for
// most, an agent reporting all together), a varint count, the first time
// and, for more than one sample, the last (offsets from the bucket's start
// and from the first, in whole seconds, milliseconds or microseconds,
// whichever is exact). Then for one sample a kind byte and its value; for
// more, three bytes of value kinds (value_codec.h) and flags saying which of
// first and last equal the minimum or maximum, then sum, min, max, and first
// and last unless flagged. About 25 bytes per series for a 10 s bucket of an
// agent's values, against 72 in format 1 (a version byte, then 72 fixed
// bytes per series), which is still read.
//
// Version byte 3 is format 2 for a finest bucket whose samples the coarser
// widths do not hold yet: ingest adds a report to its agent's newest finest
// bucket alone, and folds that bucket into the coarser ones once a newer
// one starts (rollup.h).
//
// Thread-safety: pure functions.
#ifndef METRICS_STORAGE_FORMAT_ROLLUP_CODEC_H_
#define METRICS_STORAGE_FORMAT_ROLLUP_CODEC_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "storage/rollup.h"

namespace metrics::storage {

// Whether the coarser widths hold a finest bucket's samples.
enum class Folding { kFolded, kUnfolded };

// The stats of a bucket starting at `bucket_start_us` (times are stored
// relative to it).
std::string EncodeAgentRollup(const AgentRollup& rollup,
                              int64_t bucket_start_us,
                              Folding folding = Folding::kFolded);
std::string EncodeAgentRollup(const SortedRollup& rollup,
                              int64_t bucket_start_us,
                              Folding folding = Folding::kFolded);
// Whether `bytes` (an encoded bucket) is marked unfolded.
bool IsUnfolded(absl::string_view bytes);
// DATA_LOSS for bytes that are not EncodeAgentRollup's output for a bucket
// starting at `bucket_start_us`.
absl::StatusOr<AgentRollup> DecodeAgentRollup(absl::string_view bytes,
                                              int64_t bucket_start_us);
// The same, keeping only the series in `wanted` (sorted ascending).
absl::StatusOr<AgentRollup> DecodeAgentRollup(
    absl::string_view bytes, int64_t bucket_start_us,
    const std::vector<int64_t>& wanted);
// The same as a vector: what ingest merges into, without a btree to build
// and free for each stored bucket.
absl::StatusOr<SortedRollup> DecodeSortedRollup(absl::string_view bytes,
                                                int64_t bucket_start_us);

}  // namespace metrics::storage

#endif  // METRICS_STORAGE_FORMAT_ROLLUP_CODEC_H_
