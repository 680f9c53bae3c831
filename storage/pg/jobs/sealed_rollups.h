// The rollup half of a seal: adds an agent's reports that were not in the
// rollups yet (packed format 2, packed_report.h) to system_rollups at every
// width, in the transaction that seals them. Each bucket is merged with
// what is stored (stored samples were ingested earlier) and written back in
// place. Ingest writes no rollups, so this and rollup rebuild are their
// only writers, both under the agent's rollup advisory lock.
//
// Earlier versions kept a 10 s width whose newest bucket of an agent could
// be unfolded (its samples not yet in the coarser widths; rollup.h): the
// first seal of the agent folds that bucket into the coarser widths and
// marks it folded, so readers stop adding it.
//
// Thread-safety: stateless; a call runs on the caller's transaction.
#ifndef METRICS_STORAGE_PG_JOBS_SEALED_ROLLUPS_H_
#define METRICS_STORAGE_PG_JOBS_SEALED_ROLLUPS_H_

#include <pqxx/transaction>

#include <cstdint>
#include <string>
#include <vector>

#include "storage/format/sealed_window.h"

namespace metrics::storage::pg {

// Adds `reports` (one agent's, in storage order: their samples merge in
// that order) to every stored width, and folds the agent's unfolded 10 s
// bucket of an earlier version if it has one.
// REQUIRES: `tx` holds the agent's RollupLockKey.
// Throws (libpqxx, or std::runtime_error for a stored bucket that does not
// decode or rows that changed under the lock): the seal rolls back.
void AddToRollups(pqxx::work& tx, int32_t trial, const std::string& agent,
                  const std::vector<const WindowReport*>& reports);

}  // namespace metrics::storage::pg

#endif  // METRICS_STORAGE_PG_JOBS_SEALED_ROLLUPS_H_
