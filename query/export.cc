#include "query/export.h"

#include <algorithm>
#include <optional>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "common/status_macros.h"
#include "query/csv_export.h"
#include "query/trace_export.h"
#include "storage/rollup.h"

namespace metrics::query {

namespace {

using storage::SeriesInfo;

// Rollup rows of the expired part are read an hour of buckets at a time
// (60 rows per agent at 60 s) and put in time order across agents.
constexpr int64_t kRollupSliceUs = int64_t{3600} * 1000000;

// The rows of one slice; a read that starts over drops what it took.
class RowCollector : public storage::RollupSink {
 public:
  void Restart() override { rows.clear(); }
  void Take(const storage::RollupRow& row) override { rows.push_back(row); }
  std::vector<storage::RollupRow> rows;
};

// The finest rollup buckets of `selection` that start in [from_us, to_us),
// in time order across agents, to `writer`.
absl::Status WriteBuckets(storage::ChartReads& reads, int32_t trial_id,
                          const std::vector<SeriesInfo>& series, int64_t from_us, int64_t to_us,
                          absl::Time deadline, CsvExportWriter& writer) {
  const int width_s = storage::kRollupWidthsSeconds[0];
  std::vector<std::string> agents;
  std::vector<int64_t> series_ids;
  absl::flat_hash_map<int64_t, size_t> index_of;
  for (size_t i = 0; i < series.size(); ++i) {
    agents.push_back(series[i].agent_id);
    series_ids.push_back(series[i].series_id);
    index_of[series[i].series_id] = i;
  }
  std::sort(agents.begin(), agents.end());
  agents.erase(std::unique(agents.begin(), agents.end()), agents.end());
  std::vector<std::pair<size_t, const storage::RollupStats*>> line;
  for (int64_t slice = from_us; slice < to_us; slice += kRollupSliceUs) {
    RowCollector collector;
    RETURN_IF_ERROR(reads.ReadRollups(trial_id, agents, width_s, series_ids, slice,
                                      std::min(slice + kRollupSliceUs, to_us), deadline,
                                      collector));
    std::stable_sort(collector.rows.begin(), collector.rows.end(),
                     [](const storage::RollupRow& a, const storage::RollupRow& b) {
                       return a.bucket_start_us < b.bucket_start_us;
                     });
    for (const storage::RollupRow& row : collector.rows) {
      // The row's series in the order of the list, as raw lines are.
      line.clear();
      for (const auto& [id, stats] : row.stats) {
        const auto index = index_of.find(id);
        if (index != index_of.end() && stats.count > 0) line.emplace_back(index->second, &stats);
      }
      std::sort(line.begin(), line.end());
      for (const auto& [index, stats] : line) {
        RETURN_IF_ERROR(writer.TakeBucket(index, row.bucket_start_us, width_s, *stats));
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ExportCsv(storage::ChartReads& reads, const QueryRequest& request,
                       absl::Time deadline, const ExportEmit& emit, size_t chunk_bytes) {
  ASSIGN_OR_RETURN(Selection selection, SelectSeries(reads, request, deadline));
  if (selection.series.empty() || selection.from_us >= selection.to_us) {
    return CsvExportWriter(selection.series, false, chunk_bytes, emit).Finish();
  }
  std::optional<int64_t> horizon;
  {
    CsvExportWriter writer(selection.series, false, chunk_bytes, emit);
    const absl::Status streamed =
        reads.StreamRawSamples(request.trial_id, selection.series, selection.from_us,
                               selection.to_us, deadline, writer);
    horizon = storage::RawHorizonOf(streamed);
    if (!horizon) {
      RETURN_IF_ERROR(streamed);
      return writer.Finish();
    }
    // Nothing was taken or sent: the export starts over with buckets.
  }
  // Buckets up to the first whole bucket after the horizon (the one holding
  // it lost samples), raw samples from there.
  const int64_t width_us = int64_t{storage::kRollupWidthsSeconds[0]} * 1000000;
  const int64_t raw_from = storage::AlignDown(*horizon + width_us - 1, width_us);
  CsvExportWriter writer(selection.series, true, chunk_bytes, emit);
  absl::Status status = WriteBuckets(
      reads, request.trial_id, selection.series, storage::AlignDown(selection.from_us, width_us),
      std::min(raw_from, selection.to_us), deadline, writer);
  if (status.ok() && raw_from < selection.to_us) {
    status = reads.StreamRawSamples(request.trial_id, selection.series, raw_from,
                                    selection.to_us, deadline, writer);
    if (storage::RawHorizonOf(status)) {
      status = absl::AbortedError(
          "raw retention removed samples of the window while it was being exported; "
          "export it again");
    }
  }
  RETURN_IF_ERROR(status);
  return writer.Finish();
}

absl::Status ExportTrace(QueryEngine& engine, const QueryRequest& request, int64_t base_time_ns,
                         absl::Time deadline, const ExportEmit& emit, size_t chunk_bytes) {
  ASSIGN_OR_RETURN(QueryResult result, engine.Query(request, deadline));
  return WriteTrace(result, request.trial_id, base_time_ns, chunk_bytes, emit);
}

}  // namespace metrics::query
