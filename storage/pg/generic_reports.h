// The platform's trial-metrics API in the database: a trial's newest run
// (trials.run_id) and the platform's generic metric rows (the training,
// validation and generic partitions of `metrics`, in the platform's shape:
// {"avg_metrics": ..., "batch_metrics": ...} or, for validation,
// {"validation_metrics": ...}), written and read as the platform does (see
// MetricStore::BeginTrialRun, WriteGenericReport and ReadGenericReports for
// the contracts). Relies on the trials primary key and on the partial
// indexes (trial_id, total_batches) WHERE NOT archived of migration 0006.
//
// Thread-safety: thread-safe (each call leases its own connection).
#ifndef METRICS_STORAGE_PG_GENERIC_REPORTS_H_
#define METRICS_STORAGE_PG_GENERIC_REPORTS_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "storage/metric_store.h"
#include "storage/pg/connection_pool.h"

namespace metrics::storage::pg {

absl::StatusOr<Trial> BeginTrialRun(ConnectionPool& pool, int32_t trial_id,
                                    int32_t run_id, absl::Time deadline);

absl::StatusOr<GenericWrite> WriteGenericReport(ConnectionPool& pool,
                                                const GenericReport& report,
                                                absl::Time deadline);

absl::StatusOr<std::vector<GenericRow>> ReadGenericReports(
    ConnectionPool& pool, int32_t trial_id, absl::string_view group,
    int32_t after_batches, size_t limit, absl::Time deadline);

}  // namespace metrics::storage::pg

#endif  // METRICS_STORAGE_PG_GENERIC_REPORTS_H_
