#include "storage/pg/reads/routed_reads.h"

#include "common/status_macros.h"

namespace metrics::storage::pg {

template <typename T, typename Body>
absl::StatusOr<T> RoutedReads::Route(Body read) {
  if (replica_->UseStandby()) {
    absl::StatusOr<T> answer = read(*standby_);
    if (answer.ok() || !ReadReplica::WorthRetryingOnPrimary(answer.status())) {
      return answer;
    }
    replica_->ReadFailed(answer.status());
  }
  return read(*primary_);
}

absl::StatusOr<std::vector<Trial>> RoutedReads::ListTrials(
    const TrialListFilter& filter, absl::Time deadline) {
  return Route<std::vector<Trial>>(
      [&](PgChartReads& reads) { return reads.ListTrials(filter, deadline); });
}

absl::StatusOr<std::vector<SeriesInfo>> RoutedReads::ListSeries(
    int32_t trial_id, bool extents, absl::Time deadline) {
  return Route<std::vector<SeriesInfo>>([&](PgChartReads& reads) {
    return reads.ListSeries(trial_id, extents, deadline);
  });
}

absl::Status RoutedReads::ReadRollups(
    int32_t trial_id, const std::vector<std::string>& agents, int width_s,
    const std::vector<int64_t>& series_ids, int64_t from_us, int64_t to_us,
    absl::Time deadline, RollupSink& sink) {
  // The value is unused: the rows went to the sink (restarted by each try).
  return Route<bool>([&](PgChartReads& reads) -> absl::StatusOr<bool> {
           RETURN_IF_ERROR(reads.ReadRollups(trial_id, agents, width_s,
                                             series_ids, from_us, to_us,
                                             deadline, sink));
           return true;
         })
      .status();
}

absl::StatusOr<std::vector<std::vector<Sample>>> RoutedReads::ReadRawSamples(
    int32_t trial_id, const std::vector<SeriesInfo>& series, int64_t from_us,
    int64_t to_us, int64_t max_reports, absl::Time deadline) {
  return Route<std::vector<std::vector<Sample>>>([&](PgChartReads& reads) {
    return reads.ReadRawSamples(trial_id, series, from_us, to_us, max_reports,
                                deadline);
  });
}

absl::Status RoutedReads::StreamRawSamples(int32_t trial_id,
                                          const std::vector<SeriesInfo>& series,
                                          int64_t from_us, int64_t to_us,
                                          absl::Time deadline, RawSampleSink& sink) {
  // Read again from the primary only when the standby handed out nothing:
  // what the sink took may have left the process.
  class Counting : public RawSampleSink {
   public:
    explicit Counting(RawSampleSink& sink) : sink_(sink) {}
    absl::Status Take(size_t series, const Sample& sample) override {
      ++taken;
      return sink_.Take(series, sample);
    }
    int64_t taken = 0;

   private:
    RawSampleSink& sink_;
  } counting(sink);
  if (replica_->UseStandby()) {
    absl::Status status =
        standby_->StreamRawSamples(trial_id, series, from_us, to_us, deadline, counting);
    if (status.ok() || counting.taken > 0 || !ReadReplica::WorthRetryingOnPrimary(status)) {
      return status;
    }
    replica_->ReadFailed(status);
  }
  return primary_->StreamRawSamples(trial_id, series, from_us, to_us, deadline, sink);
}

}  // namespace metrics::storage::pg
