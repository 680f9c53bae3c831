// PgMetricStore's options, apart from the store so that a server's options
// name them without libpqxx.
//
// Thread-safety: plain structs.
#ifndef METRICS_STORAGE_PG_PG_METRIC_STORE_OPTIONS_H_
#define METRICS_STORAGE_PG_PG_METRIC_STORE_OPTIONS_H_

#include <functional>
#include <string>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "storage/batch_validation.h"
#include "storage/pg/ingest/ingest_writer_options.h"

namespace metrics::storage::pg {

// Reads from a hot standby (see ReadReplica): ListTrials, ListSeries,
// ReadRollups and ReadRawSamples go there while it is current enough.
struct ReadFromStandbyOptions {
  std::string database_url;  // "": every read on the primary
  absl::Duration max_lag = absl::Seconds(5);
  absl::Duration check_every = absl::Seconds(1);
  // A line for the log when reads move between the servers.
  std::function<void(const std::string&)> on_change;
};

struct PgMetricStoreOptions {
  std::string database_url;  // "" for the PG* variables
  // Connections for blocking calls (the writer's lanes have their own).
  int pool_size = 4;
  IngestWriterOptions writer;  // its database_url is set from the above
  IngestLimits limits;
  ReadFromStandbyOptions read;
  // "Now", for the future-time check of reports.
  std::function<absl::Time()> clock = [] { return absl::Now(); };
};

}  // namespace metrics::storage::pg

#endif  // METRICS_STORAGE_PG_PG_METRIC_STORE_OPTIONS_H_
