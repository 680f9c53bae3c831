// Exports of a trial's system metrics for use outside the service, written
// as a stream of chunks so that a run of any length costs bounded memory:
//   - ExportCsv: every raw sample of the selection in the window, in time
//     order (csv_export.h). Where raw retention removed the window's first
//     samples, the finest rollup buckets (60 s) stand in for them, up to the
//     first whole bucket of what raw data remains, and the CSV says so in
//     its extra columns.
//   - ExportTrace: the chart answer of the selection (QueryEngine::Query,
//     bounded by max_points) as a Chrome trace (trace_export.h).
// The request's selection and window mean what they mean to Query, and are
// checked the same way (INVALID_ARGUMENT naming the field; NOT_FOUND for an
// unknown trial). A failure before the first chunk is the call's status;
// after it, the stream ends with it.
//
// Thread-safety: thread-safe (the reads are); each call drives its own
// writer.
#ifndef METRICS_QUERY_EXPORT_H_
#define METRICS_QUERY_EXPORT_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "query/query_engine.h"
#include "storage/metric_store.h"

namespace metrics::query {

using ExportEmit = std::function<absl::Status(std::string chunk)>;

// Chunks of about this size: each is a gRPC message and a hand-over between
// threads, so fewer make the export faster (64 KiB: 1.3 M values/s, 256 KiB:
// 2.5 M, 1 MiB: no faster; bench/export.sh), at a small hold per export.
inline constexpr size_t kExportChunkBytes = 256 * 1024;

absl::Status ExportCsv(storage::ChartReads& reads, const QueryRequest& request,
                       absl::Time deadline, const ExportEmit& emit,
                       size_t chunk_bytes = kExportChunkBytes);

absl::Status ExportTrace(QueryEngine& engine, const QueryRequest& request,
                         int64_t base_time_ns, absl::Time deadline, const ExportEmit& emit,
                         size_t chunk_bytes = kExportChunkBytes);

}  // namespace metrics::query

#endif  // METRICS_QUERY_EXPORT_H_
