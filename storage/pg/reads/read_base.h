// What the store's read classes share: a pool to lease from, the phrase
// naming where errors happened, the series columns they read, and the
// trial check run before listing a trial's series.
//
// Thread-safety: thread-safe (the pool is; each call leases a connection).
#ifndef METRICS_STORAGE_PG_READS_READ_BASE_H_
#define METRICS_STORAGE_PG_READS_READ_BASE_H_

#include <pqxx/row>
#include <pqxx/transaction_base>

#include <cstdint>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "storage/metric_store.h"
#include "storage/pg/connection_pool.h"
#include "storage/pg/pooled_transaction.h"
#include "storage/pg/prepared.h"

namespace metrics::storage::pg {

class PgReadsBase {
 protected:
  // `where` ends the operation named in errors ("" or " on the standby").
  PgReadsBase(ConnectionPool& pool, std::string where)
      : pool_(pool), where_(std::move(where)) {}

  // Runs `body` in a read transaction on the pool, `where_` naming it.
  template <typename T, typename Body>
  absl::StatusOr<T> Run(absl::string_view operation, absl::Time deadline, Body body) {
    return Read<T>(pool_, absl::StrCat(operation, where_), deadline, std::move(body));
  }
  // The same, on one snapshot (ReadSnapshot).
  template <typename T, typename Body>
  absl::StatusOr<T> RunSnapshot(absl::string_view operation, absl::Time deadline, Body body) {
    return ReadSnapshot<T>(pool_, absl::StrCat(operation, where_), deadline, std::move(body));
  }

 private:
  ConnectionPool& pool_;
  const std::string where_;
};

inline constexpr char kSeriesColumnsSql[] =
    "series_id, metric_group, agent_id, gpu_uuid, name, unit";

// Maps kSeriesColumnsSql, starting at column `first`.
SeriesInfo SeriesFromRow(const pqxx::row& row, int first = 0);

// "SELECT 1 FROM trials WHERE id = $1", for CheckTrialExists: the reads
// that call it list it among their statements.
const PreparedStatement& TrialExistsStatement();

// NOT_FOUND naming the trial when it does not exist.
absl::Status CheckTrialExists(pqxx::transaction_base& tx, int32_t trial_id);

}  // namespace metrics::storage::pg

#endif  // METRICS_STORAGE_PG_READS_READ_BASE_H_
